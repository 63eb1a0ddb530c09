#pragma once
// Strategy names and the configuration a caller (or the tuning table) can ask for. The one place
// where strategies are named: the bench and the tests take names from here, and the CPU test
// cpu.variant_names_agree checks that the Python tools' list (bench/rssbench/records.py) matches it.
#include <cstring>

namespace rss {

/// Launch strategies. Names match the benchmark records and the report.
enum class Strategy : int {
  baseline,         // nine kernels, full-size intermediates in global memory
  baseline_graph,   // the same nine kernels as one CUDA Graph, instantiated once, replayed
  local_fusion,     // three kernels; the last recomputes exp from x
  megakernel_grid,  // one cooperative launch per batch, grid-wide barrier, exps retained
  megakernel_row,   // one cooperative launch per batch, row-scoped barrier, exps retained
  block_row,        // one block per row, row retained in shared memory, one ordinary launch
  cluster_row,      // one thread-block cluster per row, row retained on chip (registers or shared memory), one launch
  long_row,         // one row at a time over every SM, x held as stored on chip (overflow L2-resident), one cooperative launch
  automatic,        // picks one of the above per shape and device (rss/tuning/auto_select.hpp)
};

namespace detail {
/// Names in declaration order; strategy_name and strategy_from_name read this table.
inline constexpr const char* strategy_names[] = {"baseline",        "baseline_graph", "local_fusion",
                                                 "megakernel_grid", "megakernel_row", "block_row",
                                                 "cluster_row",     "long_row",       "automatic"};
}  // namespace detail

/// Every concrete strategy (automatic picks among them), in declaration order: tests, benches and examples iterate this.
inline constexpr Strategy all_strategies[] = {
    Strategy::baseline,       Strategy::baseline_graph, Strategy::local_fusion, Strategy::megakernel_grid,
    Strategy::megakernel_row, Strategy::block_row,      Strategy::cluster_row,    Strategy::long_row,
};

constexpr const char* strategy_name(Strategy s) noexcept {
  const int i = static_cast<int>(s);
  return i >= 0 && i <= static_cast<int>(Strategy::automatic) ? detail::strategy_names[i] : "unknown";
}

/// The strategy named `name` (as strategy_name spells it); false when there is none.
inline bool strategy_from_name(const char* name, Strategy* out) noexcept {
  if (name == nullptr || out == nullptr) return false;
  for (int i = 0; i <= static_cast<int>(Strategy::automatic); ++i) {
    if (std::strcmp(name, detail::strategy_names[i]) == 0) {
      *out = static_cast<Strategy>(i);
      return true;
    }
  }
  return false;
}

/// Where cluster_row keeps a block's share of the row between reading x and writing y.
enum class RowResidence : int {
  registers,      // fp32 in each thread's registers: x is converted once, the exponentials stay there
  shared_memory,  // as stored, in the block's shared memory, loaded by the copy engine: few registers per
                  // thread, so more blocks share an SM (16-bit rows take half the bytes of fp32 registers)
  shared_memory_pipelined,  // shared_memory with two tiles per block: the grid is the clusters that stay
                            // resident, each loops over rows and loads its next row while it works on this one
};

/// A kernel configuration of cluster_row (rss/planner/cluster_plan.hpp lists the instantiated ones).
struct ClusterConfig {
  int threads = 0;           // threads per block
  int elems_per_thread = 0;  // row elements each thread keeps (at most)
  int cluster_size = 0;      // blocks per cluster, one cluster per row
  RowResidence residence = RowResidence::registers;

  friend constexpr bool operator==(const ClusterConfig& a, const ClusterConfig& b) noexcept {
    return a.threads == b.threads && a.elems_per_thread == b.elems_per_thread && a.cluster_size == b.cluster_size &&
           a.residence == b.residence;
  }
  constexpr bool empty() const noexcept { return cluster_size == 0; }
};

/// Controls of the megakernel strategies: measurements of what retention and the single launch buy,
/// not strategies a user would pick. Only megakernel_grid takes them.
enum class MegakernelControl : int {
  none,             // the strategy itself
  no_retention,     // phases 2 and 3 re-read x and recompute the exponentials
  ordinary_launch,  // the three phases as three ordinary launches per batch (nothing retained)
};

/// What to run: a strategy and, optionally, how. Implicit from a Strategy, so
/// `op.initialize(rss::Strategy::automatic, ...)` reads as before.
struct Config {
  Strategy strategy = Strategy::automatic;
  ClusterConfig cluster{};                         // cluster_row: a configuration to use (refused when it does
                                                   // not hold the row), instead of the default
  MegakernelControl control = MegakernelControl::none;

  constexpr Config() = default;
  constexpr Config(Strategy s) noexcept : strategy(s) {}  // NOLINT: implicit on purpose
  constexpr Config(Strategy s, ClusterConfig c, MegakernelControl k = MegakernelControl::none) noexcept
      : strategy(s), cluster(c), control(k) {}

  /// A known strategy, a control only for megakernel_grid, a cluster configuration only for cluster_row.
  constexpr bool valid() const noexcept {
    const int s = static_cast<int>(strategy);
    if (s < 0 || s > static_cast<int>(Strategy::automatic)) return false;
    if (control != MegakernelControl::none && strategy != Strategy::megakernel_grid) return false;
    return cluster.empty() || strategy == Strategy::cluster_row;
  }
};

}  // namespace rss
