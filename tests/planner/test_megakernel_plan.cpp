// Host-only tests of the megakernel planner and the occupancy model it is tested with. No GPU needed.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>

#include <rss/planner/occupancy_model.hpp>
#include <rss/planner/megakernel_plan.hpp>

namespace {

constexpr int kThreads = 512;
constexpr int kRegsPerThread = 64;  // about what the megakernel's phases use
constexpr std::size_t kStaticShared = 512;

/// The modeled occupancy of the megakernel (512 threads, 64 registers, 512 B static shared memory).
struct ModeledOccupancy {
  rss::DeviceInfo device;
  int operator()(std::size_t dynamic_bytes) const {
    return rss::modeled_blocks_per_sm(device, kThreads, kRegsPerThread, dynamic_bytes + kStaticShared);
  }
};

rss::MegakernelRequest request(std::int64_t rows, std::int64_t cols, rss::DType dtype = rss::DType::fp32) {
  rss::MegakernelRequest r;
  r.rows = rows;
  r.cols = cols;
  r.dtype = dtype;
  r.threads = kThreads;
  r.static_shared_bytes = kStaticShared;
  return r;
}

rss::MegakernelPlan plan_or_fail(const rss::DeviceInfo& d, const rss::MegakernelRequest& r) {
  rss::MegakernelPlan p;
  const rss::Status s = rss::plan_megakernel(d, r, ModeledOccupancy{d}, &p);
  REQUIRE(s == rss::Status::success);
  return p;
}

std::string shape_name(const rss::MegakernelRequest& r) {
  return std::to_string(r.rows) + "x" + std::to_string(r.cols) + " " + rss::dtype_name(r.dtype) + ": ";
}

/// Every fact a plan must satisfy; "" when it does, otherwise what is wrong (names the shape).
std::string plan_violation(const rss::DeviceInfo& d, const rss::MegakernelRequest& r,
                           const rss::MegakernelPlan& p) {
  const std::string at = shape_name(r);
  if (p.rows != r.rows || p.cols != r.cols || p.threads != r.threads) return at + "request not echoed";
  if (p.blocks_per_sm < 1) return at + "blocks_per_sm < 1";
  if (p.resident_blocks != p.blocks_per_sm * d.sm_count) return at + "resident_blocks != blocks_per_sm * sm_count";
  if (p.blocks_per_sm != ModeledOccupancy{d}(p.dynamic_shared_bytes))
    return at + "blocks_per_sm is not the occupancy answer for the plan's shared memory";
  if (p.tile_elems <= 0 || p.tile_elems % 8 != 0) return at + "tile_elems not a positive multiple of 8";
  if (p.dynamic_shared_bytes != static_cast<std::size_t>(p.tile_elems) * 4) return at + "dynamic bytes != tile * 4";
  if (p.dynamic_shared_bytes + r.static_shared_bytes > d.shared_per_block_optin)
    return at + "dynamic + static shared memory above the opt-in limit";
  if (r.cols >= r.min_tile_elems && p.tile_elems < r.min_tile_elems) return at + "tile below min_tile_elems";
  if (p.tiles_per_row * p.tile_elems < r.cols) return at + "tiles do not cover the row";
  if ((p.tiles_per_row - 1) * p.tile_elems >= r.cols) return at + "an empty tile";
  if (p.blocks_per_row < 1 || p.blocks_per_row > p.tiles_per_row) return at + "a block of the row has no tile";
  if (p.evicted_tiles_per_row != p.tiles_per_row - p.blocks_per_row) return at + "evicted_tiles_per_row wrong";
  if (p.evicted_tiles != p.evicted_tiles_per_row * r.rows) return at + "evicted_tiles wrong";
  if (p.evicted_tiles_per_row > 0 && (p.rows_per_launch != 1 || p.blocks_per_row != p.resident_blocks))
    return at + "an evicting plan must give each row all resident blocks";
  if (p.launch_count < 1 || p.rows_per_launch < 1) return at + "no launch";
  std::int64_t next_row = 0;
  for (std::int64_t i = 0; i < p.launch_count; ++i) {
    const rss::MegakernelLaunch l = p.launch(i);
    if (l.first_row != next_row) return at + "launches do not cover the rows contiguously";
    if (l.row_count < 1 || l.row_count > p.rows_per_launch) return at + "launch row count out of range";
    if (l.grid_blocks != l.row_count * p.blocks_per_row) return at + "grid != rows * blocks_per_row";
    if (l.grid_blocks > p.resident_blocks) return at + "grid above resident blocks: not co-resident";
    next_row += l.row_count;
  }
  if (next_row != r.rows) return at + "launches do not cover every row exactly once";
  if (p.launch(p.launch_count).row_count != 0 || p.launch(-1).row_count != 0) return at + "launch out of range";
  return "";
}

rss::MegakernelPlan sentinel_plan() {
  rss::MegakernelPlan p;
  p.rows = p.cols = -7;
  p.threads = p.blocks_per_row = p.blocks_per_sm = p.resident_blocks = -7;
  p.tile_elems = p.tiles_per_row = p.evicted_tiles_per_row = p.evicted_tiles = -7;
  p.rows_per_launch = p.launch_count = -7;
  p.dynamic_shared_bytes = 7;
  return p;
}

bool is_sentinel(const rss::MegakernelPlan& p) {
  return p.rows == -7 && p.cols == -7 && p.threads == -7 && p.blocks_per_row == -7 && p.blocks_per_sm == -7 &&
         p.resident_blocks == -7 && p.tile_elems == -7 && p.tiles_per_row == -7 &&
         p.evicted_tiles_per_row == -7 && p.evicted_tiles == -7 && p.rows_per_launch == -7 &&
         p.launch_count == -7 && p.dynamic_shared_bytes == 7;
}

template <class Occupancy>
rss::Status refusal(const rss::DeviceInfo& d, const rss::MegakernelRequest& r, Occupancy occ, bool* untouched) {
  rss::MegakernelPlan p = sentinel_plan();
  const rss::Status s = rss::plan_megakernel(d, r, occ, &p);
  *untouched = is_sentinel(p);
  return s;
}

void check_article_shapes(const rss::DeviceInfo& d) {
  // 64 rows of 512 KiB = 32 MiB of fp32 tiles against ~29 MiB of shared memory: two launches, no eviction.
  const rss::MegakernelPlan p64 = plan_or_fail(d, request(64, 131072));
  CHECK(p64.launch_count == 2);
  CHECK(p64.evicted_tiles == 0);
  CHECK(p64.launch(0).first_row == 0);
  CHECK(p64.launch(0).row_count + p64.launch(1).row_count == 64);
  CHECK(p64.launch(0).row_count == 32);  // balanced over the launches
  CHECK(p64.launch(0).grid_blocks <= p64.resident_blocks);
  CHECK(plan_violation(d, request(64, 131072), p64) == "");

  // One row is spread over at least half the chip, not held by 3 huge tiles.
  const rss::MegakernelPlan p1 = plan_or_fail(d, request(1, 131072));
  CHECK(p1.launch_count == 1);
  CHECK(p1.blocks_per_row >= d.sm_count / 2);
  CHECK(p1.blocks_per_row >= 66);
  CHECK(p1.evicted_tiles == 0);
  CHECK(plan_violation(d, request(1, 131072), p1) == "");

  const rss::MegakernelPlan p8 = plan_or_fail(d, request(8, 131072));
  CHECK(p8.launch_count == 1);
  CHECK(p8.evicted_tiles == 0);
  CHECK(p8.launch(0).grid_blocks > d.sm_count);  // more blocks than one per SM: spread, not 8 x 3 tiles
  CHECK(plan_violation(d, request(8, 131072), p8) == "");
}

void check_eviction(const rss::DeviceInfo& d) {
  // 64 MiB of fp32 in one row: more than the whole chip's shared memory.
  const rss::MegakernelPlan p = plan_or_fail(d, request(1, 16777216));
  CHECK(p.launch_count == 1);
  CHECK(p.evicted_tiles > 0);
  CHECK(p.evicted_tiles == p.tiles_per_row - p.blocks_per_row);
  CHECK(p.blocks_per_row == p.resident_blocks);
  CHECK(p.launch(0).grid_blocks == p.resident_blocks);
  // Largest tiles: the retained part is within 4% of the whole chip's shared memory.
  const double retained_bytes = static_cast<double>(p.blocks_per_row) * static_cast<double>(p.tile_elems) * 4.0;
  CHECK(retained_bytes > 0.96 * static_cast<double>(d.shared_per_sm) * d.sm_count);
  CHECK(plan_violation(d, request(1, 16777216), p) == "");

  // Tiles are fp32 whatever the storage type: bf16 storage evicts exactly as much.
  const rss::MegakernelPlan pb = plan_or_fail(d, request(1, 16777216, rss::DType::bf16));
  CHECK(pb.evicted_tiles == p.evicted_tiles);
  CHECK(pb.tile_elems == p.tile_elems);

  // Several evicting rows: one row per launch.
  const rss::MegakernelPlan p3 = plan_or_fail(d, request(3, 16777216));
  CHECK(p3.launch_count == 3);
  CHECK(p3.evicted_tiles == 3 * p.evicted_tiles);
  CHECK(plan_violation(d, request(3, 16777216), p3) == "");
}

void check_sweep(const rss::DeviceInfo& d) {
  const std::int64_t shapes[][2] = {
      {1, 131072},  {8, 131072},   {64, 131072},  {32, 128256},  {4096, 4096},  {16384, 8192},
      {4096, 32768}, {1, 1048576}, {1, 4194304},  {1, 16777216}, {1, 1},        {3, 1000003},
      {100000, 7},  {7, 131073},   {1000, 1},     {2, 57985},    {5, 2047},     {133, 57984},
      {265, 28800}, {1, 2048},     {1, 1023},     {1, 7653888},  {1, 7653889},  {300, 1024},
  };
  const rss::DType dtypes[] = {rss::DType::fp32, rss::DType::bf16, rss::DType::fp16};
  for (const auto& shape : shapes) {
    for (const rss::DType t : dtypes) {
      const rss::MegakernelRequest r = request(shape[0], shape[1], t);
      rss::MegakernelPlan p;
      const rss::Status s = rss::plan_megakernel(d, r, ModeledOccupancy{d}, &p);
      CHECK(s == rss::Status::success);
      if (s == rss::Status::success) CHECK(plan_violation(d, r, p) == "");
    }
  }
}

void check_refusals(const rss::DeviceInfo& d) {
  bool untouched = false;

  rss::DeviceInfo no_coop = d;
  no_coop.cooperative_launch = false;
  CHECK(refusal(no_coop, request(8, 131072), ModeledOccupancy{no_coop}, &untouched) ==
        rss::Status::cooperative_unsupported);
  CHECK(untouched);

  const auto never = [](std::size_t) { return 0; };
  CHECK(refusal(d, request(8, 131072), never, &untouched) == rss::Status::not_admissible);
  CHECK(untouched);
  const auto negative = [](std::size_t) { return -1; };
  CHECK(refusal(d, request(8, 131072), negative, &untouched) == rss::Status::not_admissible);
  CHECK(untouched);

  // 1025 threads per block never launch.
  rss::MegakernelRequest too_wide = request(8, 131072);
  too_wide.threads = 1025;
  const auto wide_occ = [&](std::size_t b) { return rss::modeled_blocks_per_sm(d, 1025, 32, b + kStaticShared); };
  CHECK(refusal(d, too_wide, wide_occ, &untouched) == rss::Status::not_admissible);
  CHECK(untouched);

  // Static shared memory leaves no room for a tile.
  rss::MegakernelRequest no_room = request(8, 131072);
  no_room.static_shared_bytes = d.shared_per_block_optin;
  CHECK(refusal(d, no_room, ModeledOccupancy{d}, &untouched) == rss::Status::not_admissible);
  CHECK(untouched);

  CHECK(refusal(d, request(-1, 131072), ModeledOccupancy{d}, &untouched) == rss::Status::negative_size);
  CHECK(untouched);
  CHECK(refusal(d, request(8, -1), ModeledOccupancy{d}, &untouched) == rss::Status::negative_size);
  CHECK(untouched);

  CHECK(refusal(d, request(INT64_MAX / 2, 3), ModeledOccupancy{d}, &untouched) == rss::Status::size_overflow);
  CHECK(untouched);
  CHECK(refusal(d, request(1LL << 32, 1LL << 32), ModeledOccupancy{d}, &untouched) ==
        rss::Status::size_overflow);
  CHECK(untouched);
  // Fits as elements, not as bf16 bytes.
  CHECK(refusal(d, request(1LL << 31, 1LL << 31, rss::DType::bf16), ModeledOccupancy{d}, &untouched) ==
        rss::Status::size_overflow);
  CHECK(untouched);

  rss::MegakernelRequest no_threads = request(8, 131072);
  no_threads.threads = 0;
  CHECK(refusal(d, no_threads, ModeledOccupancy{d}, &untouched) == rss::Status::invalid_strategy);
  CHECK(untouched);

  CHECK(rss::plan_megakernel(d, request(8, 131072), ModeledOccupancy{d}, nullptr) == rss::Status::null_pointer);
}

}  // namespace

TEST_CASE("modeled_blocks_per_sm matches hand-computed Hopper occupancy", "[planner]") {
  const rss::DeviceInfo d = rss::h100_sxm_device_info();
  // 512 threads x 64 regs = 32768 registers per block: registers allow 2 of 65536.
  CHECK(rss::modeled_blocks_per_sm(d, 512, 64, 0) == 2);
  // 256 threads x 32 regs = 8192 per block: registers and threads both allow 8.
  CHECK(rss::modeled_blocks_per_sm(d, 256, 32, 0) == 8);
  // 128 threads: 16 by threads (2048 / 128), registers allow 32, so 16.
  CHECK(rss::modeled_blocks_per_sm(d, 128, 16, 0) == 16);
  // One warp, few registers: the 32-blocks-per-SM limit.
  CHECK(rss::modeled_blocks_per_sm(d, 32, 8, 0) == 32);
  // 33 regs round up to 1280 per warp (256-register units): 65536 / (1280 * 16) = 3.
  CHECK(rss::modeled_blocks_per_sm(d, 512, 33, 0) == 3);
  // 1024 threads x 64 regs uses the whole register file.
  CHECK(rss::modeled_blocks_per_sm(d, 1024, 64, 0) == 1);
  // Shared memory: 232448 + 1024 reserved = 233472, exactly one per SM.
  CHECK(rss::modeled_blocks_per_sm(d, 512, 64, 232448) == 1);
  // 115712 + 1024 = 116736 = half an SM: two fit; one byte more and only one does.
  CHECK(rss::modeled_blocks_per_sm(d, 512, 32, 115712) == 2);
  CHECK(rss::modeled_blocks_per_sm(d, 512, 32, 115713) == 1);
  // 10 KiB + 1 KiB reserved = 11264 B: 20 by shared memory, 8 by threads at 256 threads, 16 by regs.
  CHECK(rss::modeled_blocks_per_sm(d, 256, 16, 10240) == 8);
  // 128 threads, 45 KiB: 46080 + 1024 = 47104 B, 4 by shared memory (5 would need 235520 B).
  CHECK(rss::modeled_blocks_per_sm(d, 128, 16, 46080) == 4);
  // What cannot launch at all.
  CHECK(rss::modeled_blocks_per_sm(d, 512, 64, 232449) == 0);
  CHECK(rss::modeled_blocks_per_sm(d, 1025, 32, 0) == 0);
  CHECK(rss::modeled_blocks_per_sm(d, 0, 32, 0) == 0);
  CHECK(rss::modeled_blocks_per_sm(d, 512, 256, 0) == 0);
}

TEST_CASE("H100 SXM and H200 descriptions carry the Hopper limits", "[planner]") {
  const rss::DeviceInfo descs[] = {rss::h100_sxm_device_info(), rss::h200_device_info()};
  for (const rss::DeviceInfo& d : descs) {
    CHECK(d.sm_count == 132);
    CHECK(d.shared_per_block_optin == 232448);
    CHECK(d.shared_per_sm == 233472);
    CHECK(d.reserved_shared_per_block == 1024);
    CHECK(d.max_threads_per_sm == 2048);
    CHECK(d.max_blocks_per_sm == 32);
    CHECK(d.regs_per_sm == 65536);
    CHECK(d.cooperative_launch);
  }
}

TEST_CASE("article shapes: 64 rows need two launches, 1 and 8 rows one, spread over the chip", "[planner]") {
  SECTION("H100 SXM") { check_article_shapes(rss::h100_sxm_device_info()); }
  SECTION("H200") { check_article_shapes(rss::h200_device_info()); }
}

TEST_CASE("a row larger than the chip's shared memory is evicted and the eviction counted", "[planner]") {
  SECTION("H100 SXM") { check_eviction(rss::h100_sxm_device_info()); }
  SECTION("H200") { check_eviction(rss::h200_device_info()); }
}

TEST_CASE("every plan is co-resident, covers every row once and every column, and fits shared memory",
          "[planner]") {
  SECTION("H100 SXM") { check_sweep(rss::h100_sxm_device_info()); }
  SECTION("H200") { check_sweep(rss::h200_device_info()); }
}

TEST_CASE("refusals return their status and leave the plan untouched", "[planner]") {
  SECTION("H100 SXM") { check_refusals(rss::h100_sxm_device_info()); }
  SECTION("H200") { check_refusals(rss::h200_device_info()); }
}

TEST_CASE("an empty problem is success with no launch, even without cooperative launch", "[planner]") {
  rss::DeviceInfo d = rss::h200_device_info();
  d.cooperative_launch = false;
  rss::MegakernelPlan p = sentinel_plan();
  CHECK(rss::plan_megakernel(d, request(0, 131072), ModeledOccupancy{d}, &p) == rss::Status::success);
  CHECK(p.launch_count == 0);
  CHECK(p.evicted_tiles == 0);
  CHECK(p.launch(0).row_count == 0);
  p = sentinel_plan();
  CHECK(rss::plan_megakernel(d, request(64, 0), ModeledOccupancy{d}, &p) == rss::Status::success);
  CHECK(p.launch_count == 0);
  CHECK(p.rows == 64);
}

TEST_CASE("the planner never trusts a larger tile's occupancy for a smaller one", "[planner]") {
  // An occupancy that (unlike the driver's) drops for small tiles: the planner must fall back to the
  // tile size it was admitted with rather than launch more blocks than fit.
  const rss::DeviceInfo d = rss::h200_device_info();
  const auto odd = [](std::size_t bytes) { return bytes >= 100000 ? 2 : 1; };
  rss::MegakernelPlan p;
  REQUIRE(rss::plan_megakernel(d, request(8, 131072), odd, &p) == rss::Status::success);
  CHECK(p.blocks_per_sm == odd(p.dynamic_shared_bytes));
  for (std::int64_t i = 0; i < p.launch_count; ++i) CHECK(p.launch(i).grid_blocks <= p.resident_blocks);
  CHECK(p.resident_blocks == p.blocks_per_sm * d.sm_count);
}

TEST_CASE("only tiles that fit shared memory are planned: a small-shared-memory device", "[planner]") {
  // 48 KiB per block and per SM, 16 SMs: 64 rows of 131072 need many launches, never an oversized tile.
  rss::DeviceInfo d = rss::h200_device_info();
  d.sm_count = 16;
  d.shared_per_block_optin = 49152;
  d.shared_per_sm = 50176;
  const rss::MegakernelRequest r = request(64, 131072);
  const rss::MegakernelPlan p = plan_or_fail(d, r);
  CHECK(p.dynamic_shared_bytes + r.static_shared_bytes <= d.shared_per_block_optin);
  CHECK(plan_violation(d, r, p) == "");
  CHECK(p.evicted_tiles == 0);  // 16 blocks of 12160 elems hold one 131072 row
}
