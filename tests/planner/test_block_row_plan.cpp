// The block_row planner: one block per row, one launch, a persistent grid capped at the resident
// blocks, whole rows retained when a tile can hold them and eviction otherwise.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <utility>

#include "rss/planner/occupancy_model.hpp"
#include "rss/planner/megakernel_plan.hpp"

namespace {

rss::MegakernelPlan plan_for(std::int64_t rows, std::int64_t cols, rss::DType dtype = rss::DType::fp32) {
  const rss::DeviceInfo d = rss::h200_device_info();
  rss::MegakernelRequest req;
  req.rows = rows;
  req.cols = cols;
  req.dtype = dtype;
  const auto occupancy = [&](std::size_t bytes) { return rss::modeled_blocks_per_sm(d, req.threads, 64, bytes + req.static_shared_bytes); };
  rss::MegakernelPlan plan;
  REQUIRE(rss::plan_block_row(d, req, occupancy, &plan) == rss::Status::success);
  return plan;
}

}  // namespace

TEST_CASE("block_row plans one launch of one block per row over a persistent grid", "[planner][block_row]") {
  for (auto shape : {std::pair<std::int64_t, std::int64_t>{4096, 4096}, {16384, 8192}, {4096, 32768}, {3, 7},
                     {100000, 7}, {64, 131072}, {1, 16777216}}) {
    const auto [rows, cols] = shape;
    CAPTURE(rows, cols);
    const rss::MegakernelPlan p = plan_for(rows, cols);
    CHECK(p.blocks_per_row == 1);
    CHECK(p.launch_count == 1);
    const rss::MegakernelLaunch l = p.launch(0);
    CHECK(l.first_row == 0);
    CHECK(l.row_count == rows);
    CHECK(l.grid_blocks == std::min<std::int64_t>(rows, p.resident_blocks));
    CHECK(p.tiles_per_row * p.tile_elems >= cols);
    CHECK(p.evicted_tiles == (p.tiles_per_row - 1) * rows);
    CHECK(p.dynamic_shared_bytes + 512 <= rss::h200_device_info().shared_per_block_optin);
  }
}

TEST_CASE("block_row retains whole rows that fit one block and evicts the rest of longer rows", "[planner][block_row]") {
  CHECK(plan_for(4096, 32768).evicted_tiles == 0);  // 128 KiB fits one block's shared memory
  CHECK(plan_for(16384, 8192).evicted_tiles == 0);
  const rss::MegakernelPlan wide = plan_for(2, 131072);  // 512 KiB does not
  CHECK(wide.evicted_tiles_per_row == wide.tiles_per_row - 1);
  CHECK(wide.evicted_tiles_per_row > 0);
}

TEST_CASE("block_row refuses bad requests and needs no cooperative launch", "[planner][block_row]") {
  rss::DeviceInfo d = rss::h200_device_info();
  d.cooperative_launch = false;
  rss::MegakernelRequest req;
  req.rows = 8;
  req.cols = 1000;
  rss::MegakernelPlan plan;
  plan.launch_count = -7;  // sentinel
  const auto none = [](std::size_t) { return 0; };
  CHECK(rss::plan_block_row(d, req, none, &plan) == rss::Status::not_admissible);
  CHECK(plan.launch_count == -7);
  const auto model = [&](std::size_t bytes) { return rss::modeled_blocks_per_sm(d, 512, 64, bytes + 512); };
  CHECK(rss::plan_block_row(d, req, model, &plan) == rss::Status::success);
  req.rows = -1;
  CHECK(rss::plan_block_row(d, req, model, &plan) == rss::Status::negative_size);
  CHECK(rss::plan_block_row(d, req, model, nullptr) == rss::Status::null_pointer);
}
