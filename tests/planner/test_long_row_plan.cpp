// The long_row planner: one row over every SM, one block per SM, clusters as large as keep every SM busy,
// co-residency never traded, the tile as large as one block may have, the streamed remainder counted.
#include <catch2/catch.hpp>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <vector>

#include "rss/planner/long_row_plan.hpp"

namespace {

using rss::DType;
using rss::LongRowPlan;
using rss::LongRowRequest;
using rss::Status;

/// A chip whose SMs sit in GPCs of these sizes: a cluster must fit in one GPC, so clusters of `size` blocks
/// number sum(floor(gpc / size)) while one block fits an SM (dynamic shared memory at most the largest tile).
struct GpcModel {
  std::vector<int> gpcs;
  std::size_t max_dynamic;
  std::vector<std::size_t>* asked = nullptr;  // the dynamic sizes the planner asked about
  int operator()(int size, std::size_t dynamic) const {
    if (asked != nullptr) asked->push_back(dynamic);
    if (dynamic > max_dynamic) return 0;
    int clusters = 0;
    for (int g : gpcs) clusters += g / size;
    return clusters;
  }
};

/// 132 SMs in GPCs of uneven sizes, as on the H100 / H200: clusters of 2 cover every SM, of 8 only 112.
const std::vector<int> kHopperGpcs = {18, 18, 18, 18, 16, 16, 14, 14};

LongRowRequest request(std::int64_t rows, std::int64_t cols, DType dtype = DType::fp32) {
  LongRowRequest r;
  r.rows = rows;
  r.cols = cols;
  r.dtype = dtype;
  r.static_shared_bytes = 1088;  // what ptxas gives the kernel (bench/NOTES.md)
  return r;
}

LongRowPlan plan_for(const rss::DeviceInfo& d, const LongRowRequest& r, const std::vector<int>& gpcs = kHopperGpcs) {
  LongRowPlan p;
  REQUIRE(rss::plan_long_row(d, r, GpcModel{gpcs, 1u << 20}, &p) == Status::success);
  return p;
}

/// The kernel contract of long_row_plan.hpp for a plan of a non-empty request.
void check_contract(const rss::DeviceInfo& d, const LongRowRequest& r, const LongRowPlan& p, const std::vector<int>& gpcs) {
  CAPTURE(r.rows, r.cols, rss::dtype_name(r.dtype), p.cluster_size, p.clusters, p.share_elems, p.tile_elems);
  const auto bytes = static_cast<std::int64_t>(rss::dtype_bytes(r.dtype));
  CHECK(p.rows == r.rows);
  CHECK(p.cols == r.cols);
  CHECK(p.launch_count == 1);
  CHECK(p.threads == r.threads);
  CHECK(p.grid_blocks == p.clusters * p.cluster_size);
  CHECK(p.grid_blocks <= d.sm_count);
  CHECK(p.cluster_size >= 1);
  CHECK(p.cluster_size <= d.max_cluster_size);
  CHECK((p.cluster_size & (p.cluster_size - 1)) == 0);
  // Co-residency: never more clusters than the occupancy answers for the dynamic shared memory launched.
  CHECK(p.clusters <= GpcModel{gpcs, 1u << 20}(p.cluster_size, p.dynamic_shared_bytes));
  CHECK(p.share_elems % 8 == 0);
  CHECK(p.tile_elems % 8 == 0);
  CHECK(p.tile_elems > 0);
  CHECK(p.share_elems * p.grid_blocks >= r.cols);
  CHECK(p.share_elems * (p.grid_blocks - 1) < r.cols + 8 * p.grid_blocks);  // even: no block idles for want of rounding
  CHECK(p.dynamic_shared_bytes == static_cast<std::size_t>(p.tile_elems * bytes));
  CHECK(p.dynamic_shared_bytes + r.static_shared_bytes <= d.shared_per_block_optin);
  CHECK(p.dynamic_shared_bytes + r.static_shared_bytes + d.reserved_shared_per_block <= d.shared_per_sm);
  // The largest tile: 8 more elements would break one of the two limits.
  const std::size_t more = p.dynamic_shared_bytes + static_cast<std::size_t>(8 * bytes) + r.static_shared_bytes;
  CHECK((more > d.shared_per_block_optin || more + d.reserved_shared_per_block > d.shared_per_sm));
  // Registers: the request's bytes in whole multiples of 8 elements, no more.
  CHECK(p.register_elems % 8 == 0);
  CHECK(p.register_elems * bytes <= static_cast<std::int64_t>(r.register_bytes));
  CHECK((p.register_elems + 8) * bytes > static_cast<std::int64_t>(r.register_bytes));
  std::int64_t streamed = 0;
  for (int b = 0; b < p.grid_blocks; ++b) {
    const std::int64_t begin = b * p.share_elems;
    const std::int64_t n = begin >= r.cols ? 0 : std::min(p.share_elems, r.cols - begin);
    const std::int64_t on_chip = p.tile_elems + p.register_elems;
    streamed += n > on_chip ? n - on_chip : 0;
  }
  CHECK(p.streamed_elems_per_row == streamed);
  CHECK(p.streamed_elements == streamed * r.rows);
}

}  // namespace

TEST_CASE("long_row spreads the project's long rows over every SM of an H200 and an H100", "[planner][long_row]") {
  for (const rss::DeviceInfo& d : {rss::h200_device_info(), rss::h100_sxm_device_info()}) {
    for (const DType dtype : {DType::fp32, DType::bf16, DType::fp16}) {
      for (const std::int64_t cols : {std::int64_t{1} << 20, std::int64_t{1} << 22, std::int64_t{1} << 24}) {
        const LongRowRequest r = request(1, cols, dtype);
        const LongRowPlan p = plan_for(d, r);
        check_contract(d, r, p, kHopperGpcs);
        CHECK(p.grid_blocks == 132);  // every SM
        CHECK(p.cluster_size == 2);   // the largest cluster that still covers every SM
        CHECK(p.clusters == 66);
        // One block per SM: a second block's tile would not fit beside the first.
        CHECK(2 * (p.dynamic_shared_bytes + 1088 + d.reserved_shared_per_block) > d.shared_per_sm);
      }
    }
  }
}

TEST_CASE("long_row holds 16-bit rows as stored: twice the elements of an fp32 tile, and 1x16M streams little",
          "[planner][long_row]") {
  const rss::DeviceInfo d = rss::h200_device_info();
  const LongRowPlan f32 = plan_for(d, request(1, std::int64_t{1} << 24, DType::fp32));
  const LongRowPlan b16 = plan_for(d, request(1, std::int64_t{1} << 24, DType::bf16));
  CHECK(f32.tile_elems == 57840);   // (232448 - 1088) / 4, in multiples of 8
  CHECK(b16.tile_elems == 115680);  // (232448 - 1088) / 2: the same bytes, twice the elements
  CHECK(f32.share_elems == 127104);
  // fp32: every block's share passes its tile, so all but 132 tiles is streamed (re-read from L2): 54%; bf16: 8%.
  CHECK(f32.streamed_elems_per_row == 16777216 - 132 * 57840);
  CHECK(f32.streamed_elems_per_row * 100 / (std::int64_t{1} << 24) == 54);
  CHECK(b16.streamed_elems_per_row * 100 / (std::int64_t{1} << 24) == 8);
  // 1x4M and 1x1M fit the tiles whole.
  CHECK(plan_for(d, request(1, std::int64_t{1} << 22, DType::fp32)).streamed_elems_per_row == 0);
  CHECK(plan_for(d, request(1, std::int64_t{1} << 20, DType::bf16)).streamed_elems_per_row == 0);
}

TEST_CASE("long_row: between equal block counts the larger cluster wins; more blocks win over a larger cluster",
          "[planner][long_row]") {
  rss::DeviceInfo d = rss::h200_device_info();
  d.sm_count = 128;
  const std::vector<int> even(8, 16);  // 8 GPCs of 16 SMs: clusters of 8 cover every SM
  const LongRowRequest r = request(1, std::int64_t{1} << 24);
  LongRowPlan p;
  REQUIRE(rss::plan_long_row(d, r, GpcModel{even, 1u << 20}, &p) == Status::success);
  check_contract(d, r, p, even);
  CHECK(p.cluster_size == 8);
  CHECK(p.clusters == 16);
  // Without clusters (a device limit of 1) every SM is its own leader.
  d.max_cluster_size = 1;
  REQUIRE(rss::plan_long_row(d, r, GpcModel{even, 1u << 20}, &p) == Status::success);
  check_contract(d, r, p, even);
  CHECK(p.cluster_size == 1);
  CHECK(p.grid_blocks == 128);
  // An occupancy that admits fewer SMs than the chip has: the grid follows it, never the SM count.
  const auto half = [](int size, std::size_t) { return 64 / size; };
  d.max_cluster_size = 8;
  REQUIRE(rss::plan_long_row(d, r, half, &p) == Status::success);
  CHECK(p.grid_blocks == 64);
  CHECK(p.cluster_size == 8);
}

TEST_CASE("long_row gives a short row fewer blocks, at least one cluster, and odd widths whole shares",
          "[planner][long_row]") {
  const rss::DeviceInfo d = rss::h200_device_info();
  for (const std::int64_t cols : {std::int64_t{1}, std::int64_t{7}, std::int64_t{4097}, std::int64_t{10000},
                                  std::int64_t{131072}, std::int64_t{300007}, std::int64_t{1000003}}) {
    const LongRowRequest r = request(3, cols);
    const LongRowPlan p = plan_for(d, r);
    check_contract(d, r, p, kHopperGpcs);
    CHECK(p.clusters >= 1);
    // At most the clusters it takes to give each block min_share_elems (and never fewer than one).
    const std::int64_t per_cluster = r.min_share_elems * p.cluster_size;
    CHECK(p.clusters <= std::max<std::int64_t>(1, (cols + per_cluster - 1) / per_cluster));
  }
  // 10000 elements: clusters of 8 give 8 blocks, clusters of 2 only 4 (two clusters of 4096 per block).
  CHECK(plan_for(d, request(1, 10000)).grid_blocks == 8);
}

TEST_CASE("long_row holds a block's registers' share past its tile: 1x16M fp32 streams 41% instead of 54%",
          "[planner][long_row]") {
  const rss::DeviceInfo d = rss::h200_device_info();
  LongRowRequest r = request(1, std::int64_t{1} << 24, DType::fp32);
  r.register_bytes = 512 * 8 * 16;  // the fp32 kernel's: 8 vectors of 16 bytes per thread
  const LongRowPlan p = plan_for(d, r);
  check_contract(d, r, p, kHopperGpcs);
  CHECK(p.register_elems == 16384);
  CHECK(p.tile_elems == 57840);  // registers take nothing from the tile
  CHECK(p.streamed_elems_per_row == 16777216 - 132 * (57840 + 16384));
  CHECK(p.streamed_elems_per_row * 100 / (std::int64_t{1} << 24) == 41);
  // Rows that fit the tiles stream nothing, with or without registers; bytes round down to whole 8 elements.
  r.cols = std::int64_t{1} << 22;
  CHECK(plan_for(d, r).streamed_elems_per_row == 0);
  r.register_bytes = 100;  // 25 fp32 elements
  CHECK(plan_for(d, r).register_elems == 24);
  r.dtype = DType::bf16;  // 50 elements
  CHECK(plan_for(d, r).register_elems == 48);
}

TEST_CASE("long_row plans a row of 2^31 + 11 elements with 64-bit counts", "[planner][long_row]") {
  const rss::DeviceInfo d = rss::h200_device_info();
  const std::int64_t cols = (std::int64_t{1} << 31) + 11;
  const LongRowRequest r = request(1, cols);
  const LongRowPlan p = plan_for(d, r);
  check_contract(d, r, p, kHopperGpcs);
  CHECK(p.share_elems > std::int64_t{1} << 23);
  CHECK(p.share_elems * (p.grid_blocks - 1) > INT32_MAX - (std::int64_t{1} << 25));  // the last shares begin near 2^31
  CHECK(p.streamed_elems_per_row == cols - 132 * p.tile_elems);
}

TEST_CASE("long_row refuses with a precise status and leaves the plan untouched", "[planner][long_row]") {
  const rss::DeviceInfo h200 = rss::h200_device_info();
  const GpcModel model{kHopperGpcs, 1u << 20};
  LongRowPlan untouched;
  untouched.grid_blocks = 12345;
  LongRowPlan p = untouched;
  const auto same = [&] { return p.grid_blocks == untouched.grid_blocks && p.cluster_size == untouched.cluster_size; };

  CHECK(rss::plan_long_row(h200, request(1, 100), model, nullptr) == Status::null_pointer);
  CHECK(rss::plan_long_row(h200, request(-1, 100), model, &p) == Status::negative_size);
  CHECK(rss::plan_long_row(h200, request(1, -100), model, &p) == Status::negative_size);
  CHECK(rss::plan_long_row(h200, request(std::int64_t{1} << 31, std::int64_t{1} << 31), model, &p) ==
        Status::size_overflow);
  LongRowRequest no_threads = request(1, 100);
  no_threads.threads = 0;
  CHECK(rss::plan_long_row(h200, no_threads, model, &p) == Status::invalid_strategy);
  LongRowRequest huge_registers = request(1, 100);
  huge_registers.register_bytes = static_cast<std::size_t>(INT_MAX) + 1;  // more elements than the kernel counts
  CHECK(rss::plan_long_row(h200, huge_registers, model, &p) == Status::invalid_strategy);
  CHECK(same());

  rss::DeviceInfo no_cooperative = h200;
  no_cooperative.cooperative_launch = false;
  CHECK(rss::plan_long_row(no_cooperative, request(1, 1 << 20), model, &p) == Status::cooperative_unsupported);
  rss::DeviceInfo ampere = h200;
  ampere.cc_major = 8;
  CHECK(rss::plan_long_row(ampere, request(1, 1 << 20), model, &p) == Status::unsupported_device);
  rss::DeviceInfo no_clusters = h200;
  no_clusters.max_cluster_size = 0;
  CHECK(rss::plan_long_row(no_clusters, request(1, 1 << 20), model, &p) == Status::unsupported_device);
  rss::DeviceInfo no_sms = h200;
  no_sms.sm_count = 0;
  CHECK(rss::plan_long_row(no_sms, request(1, 1 << 20), model, &p) == Status::unsupported_device);
  CHECK(rss::plan_long_row(h200, request(1, 1 << 20), [](int, std::size_t) { return 0; }, &p) == Status::not_admissible);
  LongRowRequest huge_static = request(1, 1 << 20);
  huge_static.static_shared_bytes = h200.shared_per_block_optin;
  CHECK(rss::plan_long_row(h200, huge_static, model, &p) == Status::not_admissible);
  CHECK(same());

  // An empty problem plans nothing, whatever the device.
  rss::DeviceInfo nothing{};
  REQUIRE(rss::plan_long_row(nothing, request(0, 1 << 20), model, &p) == Status::success);
  CHECK(p.launch_count == 0);
  CHECK(p.grid_blocks == 0);
  REQUIRE(rss::plan_long_row(nothing, request(5, 0), model, &p) == Status::success);
  CHECK(p.launch_count == 0);
}

TEST_CASE("long_row asks the occupancy only about the tile it launches", "[planner][long_row]") {
  const rss::DeviceInfo d = rss::h200_device_info();
  std::vector<std::size_t> asked;
  LongRowPlan p;
  REQUIRE(rss::plan_long_row(d, request(1, 1 << 22, DType::bf16), GpcModel{kHopperGpcs, 1u << 20, &asked}, &p) ==
          Status::success);
  REQUIRE(!asked.empty());
  for (const std::size_t a : asked) CHECK(a == p.dynamic_shared_bytes);
}
