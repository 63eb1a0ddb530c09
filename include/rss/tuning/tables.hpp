#pragma once
// Tuning tables shipped with the library, chosen at run time by what decides performance (compute
// capability, SM count, memory size), not by the device's name. An entry records a measured winner of
// the bench's pilot mode (`rss_bench --pilot`, records in bench/results/pilot/) where it beats the
// heuristic's choice (rss/tuning/auto_select.hpp) by more than 3%; the entries are generated from those
// records by bench/rssbench/tune.py. Devices without a table (the H100 included: not measured) get the
// heuristic.
#include "rss/device_info.hpp"
#include "rss/tuning/auto_select.hpp"
#include "rss/tuning/h200_table.hpp"

namespace rss {

inline constexpr TuningTable shipped_tables[] = {
    // H200 SXM: 9.0, 132 SMs, 141 GB (the runtime reports 140.4 GiB); the H100's 80 GB do not match.
    {"NVIDIA H200", 90, 132, 120ull << 30, 160ull << 30, tuning::h200_entries, tuning::h200_entry_count},
};

/// The shipped table for a device, or null (the heuristic decides alone).
inline const TuningTable* tuning_table_for(const DeviceInfo& d) noexcept {
  for (const TuningTable& t : shipped_tables) {
    if (t.matches(d)) return &t;
  }
  return nullptr;
}

/// automatic's choice for a shape on a device: the shipped table, then the heuristic.
inline AutoChoice automatic_choice(const DeviceInfo& d, std::int64_t rows, std::int64_t cols, DType dtype) noexcept {
  return auto_select(d, tuning_table_for(d), rows, cols, dtype);
}

}  // namespace rss
