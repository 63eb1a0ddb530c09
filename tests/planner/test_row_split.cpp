// The one planning vocabulary (rss/planner/row_split.hpp) and each row program's constants over it: the
// forward cluster_row, the backward cluster_row and the sharded device path. Pure host code.
#include <catch2/catch.hpp>

#include <cstdint>
#include <type_traits>

#include "rss/backward/cluster_plan.hpp"
#include "rss/planner/cluster_plan.hpp"
#include "rss/planner/row_split.hpp"
#include "rss/sharded/plan.hpp"

using rss::ClusterConfig;
using rss::ClusterPlan;
using rss::DType;
using rss::Fit;
using rss::Status;

TEST_CASE("chunks and cluster shares are whole vectors and cover the row", "[planner][row_split]") {
  for (std::int64_t cols = 1; cols < 400000; cols = cols * 5 / 3 + 7) {
    for (int c = 1; c <= 8; ++c) {
      CAPTURE(cols, c);
      const std::int64_t chunk = rss::cluster_chunk(cols, c);
      CHECK(chunk % rss::chunk_multiple == 0);
      CHECK(chunk * c >= cols);
      CHECK(chunk - rss::chunk_multiple < (cols + c - 1) / c);  // rounded up by less than one multiple
    }
    for (const std::int64_t rows : {1, 3, 64, 4096}) {
      const rss::ChunkGeometry g = rss::plan_chunks(rows, cols, 132);
      CAPTURE(cols, rows, g.chunks, g.chunk_elems);
      CHECK(g.chunk_elems % rss::chunk_multiple == 0);
      CHECK(g.chunks * g.chunk_elems >= cols);
      CHECK((g.chunks - 1) * g.chunk_elems < cols);  // no empty chunk
      CHECK(g.chunks <= rss::max_row_chunks(cols));  // the workspace is sized for at most this many
    }
  }
  // One long row fills the GPU with 4 blocks per SM; many rows take one chunk each.
  CHECK(rss::plan_chunks(1, 8388608, 132).chunks == 528);
  CHECK(rss::plan_chunks(4096, 64128, 132).chunks == 1);
  CHECK(rss::plan_chunks(0, 100, 132).chunks == 1);  // empty: a valid geometry that launches nothing
  CHECK(rss::plan_chunks(3, 100, 0).chunks == 1);    // no SM count: no chunking
  // The sharded host path is this chunking, planned from the widest share.
  CHECK(rss::plan_host_geometry(5, 100000, 132).chunk_elems == rss::plan_chunks(5, 100000, 132).chunk_elems);
  // Grid limit: rows beyond it are looped over, by whole clusters.
  CHECK(rss::cluster_grid_blocks(10, 4) == 40);
  const std::int64_t huge = rss::cluster_grid_blocks(std::int64_t{1} << 40, 3);
  CHECK(huge <= rss::max_grid_blocks);
  CHECK(huge % 3 == 0);
}

TEST_CASE("the kernel table and the fit check come from one compile-time list", "[planner][row_split]") {
  using Grid = rss::ForwardRegisterConfigs;
  int visited = 0;
  for (int threads = 0; threads <= 1024; threads += 128) {
    for (int elems = 1; elems <= 64; ++elems) {
      const int got = rss::visit_config<Grid>(threads, elems, -1, [&](auto th, auto el) {
        static_assert(std::is_integral_v<decltype(decltype(th)::value)>);
        return decltype(th)::value * 1000 + decltype(el)::value;
      });
      CAPTURE(threads, elems);
      CHECK((got >= 0) == Grid::has(threads, elems));
      if (got >= 0) {
        CHECK(got == threads * 1000 + elems);
        ++visited;
      }
    }
  }
  int pairs = 0;  // the grid's pairs: its two lists, less the pairs it leaves out
  for (const int threads : Grid::ThreadList::values) {
    for (const int elems : Grid::ElemList::values) pairs += Grid::has(threads, elems) ? 1 : 0;
  }
  CHECK(visited == pairs);
  CHECK(pairs < Grid::ThreadList::count * Grid::ElemList::count);  // no 128-thread block of 4 elements
  CHECK(Grid::has(128, 32));
  CHECK(!Grid::has(128, 4));
  // The public lists are views of the same grids.
  CHECK(rss::cluster_row_elems[3] == 32);
  CHECK(rss::cluster_row_shared_elems[3] == 64);
  CHECK(rss::backward_cluster_elems[0] == 4);
}

TEST_CASE("each program's default rule, through the one rule", "[planner][row_split]") {
  for (std::int64_t cols = 1; cols <= 140000; cols = cols * 3 / 2 + 5) {
    for (const DType dtype : {DType::fp32, DType::bf16, DType::fp16}) {
      CAPTURE(cols, rss::dtype_name(dtype));
      const ClusterConfig f = rss::default_cluster_config(cols, dtype, 8);
      const ClusterConfig b = rss::default_backward_cluster_config(cols, dtype, 8);
      for (const ClusterConfig& c : {f, b}) {
        if (c.cluster_size == 0) continue;
        CHECK(c.elems_per_thread % (16 / rss::dtype_bytes(dtype)) == 0);
        CHECK(rss::cluster_chunk(cols, c.cluster_size) <= std::int64_t{c.threads} * c.elems_per_thread);
      }
      if (f.cluster_size > 0) CHECK(rss::cluster_config_fits(f, cols, dtype, 8));
      if (b.cluster_size > 0) {
        CHECK(rss::backward_cluster_config_fits(b, cols, dtype, 8));
        if (cols <= 8 * 256 * 32) CHECK(b.threads == 256);  // 256-thread blocks while eight of them hold the row
      }
      // The sharded device path plans a share as the forward plans a row.
      CHECK(rss::plan_device_config(cols, dtype, 8) == f);
    }
  }
  // The measured rules at a few points (bench/NOTES.md).
  CHECK(rss::default_cluster_config(4096, DType::fp32, 8) == ClusterConfig{256, 16, 1});
  CHECK(rss::default_cluster_config(131072, DType::bf16, 8) == ClusterConfig{512, 32, 8});
  // 16-bit rows of 2K-4K elements: one block of 128 threads (bench/NOTES.md, the many-row geometry).
  CHECK(rss::default_cluster_config(4096, DType::bf16, 8) == ClusterConfig{128, 32, 1});
  CHECK(rss::default_cluster_config(3001, DType::fp16, 8) == ClusterConfig{128, 32, 1});
  CHECK(rss::default_cluster_config(2048, DType::bf16, 8) == ClusterConfig{256, 8, 1});
  CHECK(rss::default_cluster_config(4097, DType::bf16, 8) == ClusterConfig{256, 32, 1});
  CHECK(rss::default_cluster_config(4096, DType::fp32, 8) == ClusterConfig{256, 16, 1});
  CHECK(rss::default_backward_cluster_config(4096, DType::bf16, 8) == ClusterConfig{256, 16, 1});
  CHECK(rss::default_backward_cluster_config(32768, DType::fp32, 8) == ClusterConfig{256, 32, 4});
  // A rule step may bound the clusters it tries: one block only, then clusters from 2.
  rss::SplitRule one_block;
  one_block.steps[one_block.step_count++] = {32, 256, 1, 1};
  CHECK(rss::apply_split_rule(one_block, rss::cluster_row_elems, 4, 8192, DType::fp32, 8) == ClusterConfig{256, 32, 1});
  CHECK(rss::apply_split_rule(one_block, rss::cluster_row_elems, 4, 8193, DType::fp32, 8).cluster_size == 0);
}

TEST_CASE("admission caps a resident-looping grid and refuses what nothing holds", "[planner][row_split]") {
  ClusterPlan p;
  REQUIRE(rss::plan_cluster_row(rss::h200_device_info(), 4096, 32768, DType::bf16, nullptr, &p) == Status::success);
  const std::int64_t one_per_row = p.grid_blocks;
  const auto resident = [](int n) {
    return [n](int* out) {
      *out = n;
      return Status::success;
    };
  };
  ClusterPlan q = p;
  REQUIRE(rss::admit_cluster_plan(q, rss::ClusterGrid::one_per_row, resident(10)) == Status::success);
  CHECK(q.grid_blocks == one_per_row);  // clusters come and go
  REQUIRE(rss::admit_cluster_plan(q, rss::ClusterGrid::resident_looping, resident(10)) == Status::success);
  CHECK(q.grid_blocks == 10 * q.config.cluster_size);
  ClusterPlan r = p;
  CHECK(rss::admit_cluster_plan(r, rss::ClusterGrid::one_per_row, resident(0)) == Status::not_admissible);
  CHECK(rss::admit_cluster_plan(r, rss::ClusterGrid::one_per_row, [](int*) { return Status::cuda_error; }) ==
        Status::cuda_error);
  // Fewer rows than resident clusters: the grid stays one cluster per row.
  ClusterPlan few;
  REQUIRE(rss::plan_cluster_row(rss::h200_device_info(), 3, 32768, DType::bf16, nullptr, &few) == Status::success);
  REQUIRE(rss::admit_cluster_plan(few, rss::ClusterGrid::resident_looping, resident(10)) == Status::success);
  CHECK(few.grid_blocks == 3 * few.config.cluster_size);
  // The sharded device path admits through the same rule.
  ClusterPlan sharded;
  REQUIRE(rss::plan_device_path(4096, 64128, DType::fp32, 8, 66, &sharded) == Status::success);
  CHECK(sharded.grid_blocks == 66 * sharded.config.cluster_size);
}

TEST_CASE("row_fit picks the cheapest instantiation the pointers allow", "[planner][row_split]") {
  ClusterPlan p;
  REQUIRE(rss::plan_cluster_row(rss::h200_device_info(), 8, 4096, DType::fp32, nullptr, &p) == Status::success);
  REQUIRE(p.config == ClusterConfig{256, 16, 1});  // exactly one block's share
  alignas(16) static float buffer[64];
  const void* a = buffer;
  const void* b = buffer + 4;
  const void* odd = buffer + 1;
  CHECK(rss::row_fit({a, b}, {4096, 4096}, DType::fp32, p, true) == Fit::exact);
  CHECK(rss::row_fit({a, b}, {4096, 4096}, DType::fp32, p, false) == Fit::vectors);  // no exact kernels
  CHECK(rss::row_fit({a, odd}, {4096, 4096}, DType::fp32, p, true) == Fit::checked);
  CHECK(rss::row_fit({a, b}, {4096, 4098}, DType::fp32, p, true) == Fit::checked);  // a stride off the vectors
  // The backward checks all four matrices and their strides.
  CHECK(rss::row_fit({a, b, a, odd}, {4096, 4096, 4096, 4096}, DType::fp32, p, false) == Fit::checked);
  ClusterPlan narrow = p;
  narrow.cols = 4000;  // a row short of the share: vectors, not exact
  CHECK(rss::row_fit({a, b}, {4096, 4096}, DType::fp32, narrow, true) == Fit::vectors);
  narrow.cols = 4001;  // not whole vectors
  CHECK(rss::row_fit({a, b}, {4096, 4096}, DType::fp32, narrow, true) == Fit::checked);
}

TEST_CASE("register budget: blocks per SM that hold threads x registers, from the occupancy model", "[planner][row_split]") {
  // The budgets the forward row program asks for (forward_registers below) on 256 and 512 threads.
  CHECK(rss::register_budget_blocks(256, 40) == 6);
  CHECK(rss::register_budget_blocks(256, 48) == 5);
  CHECK(rss::register_budget_blocks(256, 64) == 4);
  CHECK(rss::register_budget_blocks(512, 40) == 3);
  CHECK(rss::register_budget_blocks(512, 48) == 2);
  CHECK(rss::register_budget_blocks(512, 64) == 2);
  // Never fewer than one block, never more than the SM's 2048 threads allow.
  CHECK(rss::register_budget_blocks(1024, 255) == 1);
  CHECK(rss::register_budget_blocks(256, 8) == 8);
  static_assert(rss::register_budget_blocks(256, 48) == 5, "usable in __launch_bounds__");
}

TEST_CASE("the forward's register budget: tight where a 16-bit or 512-thread share has no bounds tests", "[planner][row_split]") {
  using rss::forward_registers;
  // x 16: 16-bit storage or 512 threads without bounds tests at 40 registers (6 blocks of 256, 3 of 512) ...
  CHECK(rss::register_budget_blocks(256, forward_registers(256, 16, Fit::exact, 2)) == 6);
  CHECK(rss::register_budget_blocks(256, forward_registers(256, 16, Fit::vectors, 2)) == 6);
  CHECK(rss::register_budget_blocks(512, forward_registers(512, 16, Fit::exact, 4)) == 3);
  // ... fp32 at 256 threads and every fp32 `checked` share at Elems + 32 (measured: bench/NOTES.md) ...
  CHECK(rss::register_budget_blocks(256, forward_registers(256, 16, Fit::exact, 4)) == 5);
  CHECK(rss::register_budget_blocks(512, forward_registers(512, 16, Fit::checked, 4)) == 2);
  // ... and a 16-bit `checked` share of 16 or more at Elems + 40, Elems + 48 writing the statistics (ptxas spilled
  // below those once the share kept 32-bit words).
  CHECK(rss::register_budget_blocks(256, forward_registers(256, 16, Fit::checked, 2)) == 4);
  CHECK(rss::register_budget_blocks(256, forward_registers(256, 32, Fit::checked, 2)) == 3);
  CHECK(rss::register_budget_blocks(128, forward_registers(128, 32, Fit::checked, 2)) == 7);
  CHECK(rss::register_budget_blocks(128, forward_registers(128, 32, Fit::checked, 2, true)) == 6);
  CHECK(rss::register_budget_blocks(512, forward_registers(512, 8, Fit::checked, 2)) == 3);
  // x 32 rounds to the same blocks either way (4 of 256, 2 of 512), except a 16-bit `vectors` share of 256 threads
  // without statistics: five (one wave of 32 rows in 16-block clusters); x 4 and x 8 at the floor of 40.
  CHECK(rss::register_budget_blocks(256, forward_registers(256, 32, Fit::vectors, 2)) == 5);
  CHECK(rss::register_budget_blocks(256, forward_registers(256, 32, Fit::exact, 2)) == 4);
  CHECK(rss::register_budget_blocks(256, forward_registers(256, 32, Fit::vectors, 2, true)) == 4);
  CHECK(rss::register_budget_blocks(512, forward_registers(512, 32, Fit::vectors, 2)) == 2);
  CHECK(rss::register_budget_blocks(512, forward_registers(512, 32, Fit::exact, 4)) == 2);
  CHECK(forward_registers(256, 8, Fit::checked, 4) == 40);
  CHECK(forward_registers(512, 4, Fit::exact, 2) == 40);
  // Where ptxas spilled at those budgets: a checked 16-bit 512 x 32 share (one block per SM) and the statistics'
  // write in 512 x 16 16-bit blocks (two); the forward without statistics and fp32 keep theirs.
  CHECK(rss::register_budget_blocks(512, forward_registers(512, 32, Fit::checked, 2)) == 1);
  CHECK(rss::register_budget_blocks(512, forward_registers(512, 32, Fit::checked, 4)) == 2);
  CHECK(rss::register_budget_blocks(512, forward_registers(512, 16, Fit::vectors, 2, true)) == 2);
  CHECK(rss::register_budget_blocks(512, forward_registers(512, 16, Fit::vectors, 2, false)) == 3);
  CHECK(rss::register_budget_blocks(256, forward_registers(256, 16, Fit::vectors, 2, true)) == 6);
}

TEST_CASE("the forward's tile budget: 16-bit vectors tiles keep every thread of an SM", "[planner][row_split]") {
  using rss::forward_tile_registers;
  // 16-bit `vectors` tiles without statistics at 32 registers: 2048 threads an SM, as before the fused exponential.
  CHECK(rss::register_budget_blocks(512, forward_tile_registers(Fit::vectors, 2, false)) == 4);
  CHECK(rss::register_budget_blocks(256, forward_tile_registers(Fit::vectors, 2, false)) == 8);
  // fp32's and the statistics-writing ones at 40 (they spilled 8 bytes at 32), `checked` ones at 64.
  CHECK(rss::register_budget_blocks(512, forward_tile_registers(Fit::vectors, 4, false)) == 3);
  CHECK(rss::register_budget_blocks(256, forward_tile_registers(Fit::vectors, 2, true)) == 6);
  CHECK(rss::register_budget_blocks(512, forward_tile_registers(Fit::checked, 2, false)) == 2);
  CHECK(rss::register_budget_blocks(256, forward_tile_registers(Fit::checked, 4, true)) == 4);
  static_assert(rss::register_budget_blocks(128, forward_tile_registers(Fit::vectors, 2, false)) == 16,
                "usable in __launch_bounds__");
}
