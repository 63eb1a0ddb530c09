#pragma once
// Tuning tables shipped with the library, chosen at run time from the device's name. Each entry is a
// measured winner of the bench's pilot mode (`rss_bench --pilot`, records in
// bench/results/pilot/h200_pilot.json) where it beat the heuristic's choice (rss/tuning/auto_select.hpp)
// by more than 3%; everywhere else the pilot's winners are what the heuristic picks already. The H100
// shares the H200's SM array and takes its table, which has not been measured on an H100.
#include <cstring>

#include "rss/tuning/auto_select.hpp"

namespace rss {

inline constexpr TuningEntry hopper_entries[] = {
    // dtype, rows, cols, strategy, cluster {threads, elems_per_thread, cluster_size}
    // One row of 131072: 16 blocks of 512 x 16 elements spread it wider than the default 8 x (512 x 32).
    {DType::bf16, 1, 1, 131072, 131072, Strategy::cluster_row, {512, 16, 16}},  // 13.7 vs 14.2 us
};

inline constexpr TuningTable shipped_tables[] = {
    {"NVIDIA H200", hopper_entries, static_cast<int>(sizeof(hopper_entries) / sizeof(hopper_entries[0]))},
    {"NVIDIA H100", hopper_entries, static_cast<int>(sizeof(hopper_entries) / sizeof(hopper_entries[0]))},
};

/// The shipped table for a device name, or null (the heuristic decides alone).
inline const TuningTable* tuning_table_for(const char* device_name) noexcept {
  if (device_name == nullptr) return nullptr;
  for (const TuningTable& t : shipped_tables) {
    if (std::strncmp(device_name, t.device_name_prefix, std::strlen(t.device_name_prefix)) == 0) return &t;
  }
  return nullptr;
}

}  // namespace rss
