#pragma once
// Which strategies a GPU test runs, and which rows cluster_row holds on this device (longer rows are
// refused with not_admissible by design; tests expect that refusal instead of a result).
#include <catch2/catch.hpp>

#include <cstdint>
#include <iterator>
#include <vector>

#include "rss/rss.cuh"

namespace rss_test {

/// Every concrete strategy, then automatic.
inline std::vector<rss::Strategy> strategies_and_automatic() {
  std::vector<rss::Strategy> s(std::begin(rss::all_strategies), std::end(rss::all_strategies));
  s.push_back(rss::Strategy::automatic);
  return s;
}

/// A configuration under test and the name the bench gives it.
struct NamedConfig {
  const char* name;
  rss::Config config;
};

/// Every concrete strategy, cluster_row with the row in shared memory (one tile, then two), then the
/// megakernel's two controls.
inline std::vector<NamedConfig> strategies_and_controls() {
  std::vector<NamedConfig> v;
  for (rss::Strategy s : rss::all_strategies) v.push_back({rss::strategy_name(s), s});
  // Clusters of 8 blocks for every row the configuration holds (up to 262144 elements): short rows leave
  // blocks without elements, which the kernel must handle too. Longer rows are refused (not_admissible).
  v.push_back({"cluster_row_shared",
               {rss::Strategy::cluster_row, rss::ClusterConfig{512, 64, 8, rss::RowResidence::shared_memory}}});
  // Two tiles per block and only the resident clusters launched: shapes with many rows loop (rows up to
  // 32768 elements, longer ones refused; the fp32 ones over 16384 need two 64 KB tiles per block).
  v.push_back({"cluster_row_pipelined",
               {rss::Strategy::cluster_row, rss::ClusterConfig{512, 32, 2, rss::RowResidence::shared_memory_pipelined}}});
  v.push_back({"control_no_retention", {rss::Strategy::megakernel_grid, {}, rss::MegakernelControl::no_retention}});
  v.push_back({"control_ordinary_launch",
               {rss::Strategy::megakernel_grid, {}, rss::MegakernelControl::ordinary_launch}});
  return v;
}

/// Whether cluster_row holds a row of `cols` elements of T on the current device: with `preferred` when the
/// call asks for one (a preference is used as given or refused, never replaced), else with the default.
template <class T>
bool cluster_row_holds(std::int64_t cols, const rss::ClusterConfig& preferred = {}) {
  rss::DeviceInfo device;
  REQUIRE(rss::current_device_info(&device) == rss::Status::success);
  if (!preferred.empty()) return rss::cluster_config_fits(preferred, cols, rss::dtype_of<T>, device.max_cluster_size);
  return rss::default_cluster_config(cols, rss::dtype_of<T>, device.max_cluster_size).cluster_size > 0;
}

}  // namespace rss_test
