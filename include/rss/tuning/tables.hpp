#pragma once
// Tuning tables shipped with the library, chosen at run time from the device's name. An entry records
// a measured winner of the bench's pilot mode (`rss_bench --pilot`, records in
// bench/results/pilot/h200_pilot.json) where it beats the heuristic's choice (rss/tuning/auto_select.hpp)
// by more than 3%. On the H200, within the cluster sizes the library launches (up to 8), the pilot's
// winners on every benchmarked shape are what the heuristic (derived from them) picks, so its table is
// empty. The H100 shares the H200's SM array and takes its table; it has not been measured.
#include <cstring>

#include "rss/tuning/auto_select.hpp"

namespace rss {

inline constexpr TuningTable shipped_tables[] = {
    {"NVIDIA H200", nullptr, 0},
    {"NVIDIA H100", nullptr, 0},
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
