#pragma once
// Tuning tables shipped with the library, chosen at run time from the device's name. An entry records
// a measured winner of the bench's pilot mode (`rss_bench --pilot`, records in bench/results/pilot/)
// where it beats the heuristic's choice (rss/tuning/auto_select.hpp) by more than 3%; the tables are
// generated from those records by bench/tools/tune.py. The H100 shares the H200's SM array and takes
// its table; it has not been measured.
#include <cstring>

#include "rss/tuning/auto_select.hpp"
#include "rss/tuning/h200_table.hpp"

namespace rss {

inline constexpr TuningTable shipped_tables[] = {
    {"NVIDIA H200", tuning::h200_entries, tuning::h200_entry_count},
    {"NVIDIA H100", tuning::h200_entries, tuning::h200_entry_count},
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
