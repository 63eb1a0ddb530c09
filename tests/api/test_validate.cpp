// Host-only parts of the API, testable without a GPU: argument validation, workspace carving,
// launch metadata counting and status messages.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <limits>
#include <set>
#include <string>

#include "rss/launch_info.hpp"
#include "rss/validate.hpp"
#include "rss/workspace.hpp"
#include "rss/status.hpp"
#include "rss/strategy.hpp"
#include "rss/types.hpp"

using rss::Status;

TEST_CASE("shape validation refuses negative sizes and 64-bit overflow, accepts empty problems", "[api][validate]") {
  CHECK(rss::validate_shape(-1, 5, 4) == Status::negative_size);
  CHECK(rss::validate_shape(5, -1, 4) == Status::negative_size);
  CHECK(rss::validate_shape(0, 5, 4) == Status::success);
  CHECK(rss::validate_shape(5, 0, 4) == Status::success);
  const std::int64_t max = std::numeric_limits<std::int64_t>::max();
  CHECK(rss::validate_shape(max, 2, 1) == Status::size_overflow);
  CHECK(rss::validate_shape(std::int64_t{1} << 31, std::int64_t{1} << 31, 4) == Status::size_overflow);  // 2^62 * 4 bytes
  CHECK(rss::validate_shape(std::int64_t{1} << 31, std::int64_t{1} << 30, 4) == Status::size_overflow);  // 2^63 bytes
  CHECK(rss::validate_shape(std::int64_t{1} << 30, std::int64_t{1} << 30, 4) == Status::success);        // 2^62 bytes
  CHECK(rss::validate_shape(std::int64_t{1} << 31, std::int64_t{1} << 31, 1) == Status::success);
}

TEST_CASE("call validation checks pointers and the workspace in a fixed order", "[api][validate]") {
  alignas(256) static unsigned char buffer[1024];
  const void* x = buffer;
  void* y = buffer + 256;
  void* ws = buffer + 512;
  const rss::Layout l = rss::Layout::contiguous(2, 3);
  CHECK(rss::validate_call(x, y, l, 4, ws, 256, 256) == Status::success);
  CHECK(rss::validate_call(nullptr, y, l, 4, ws, 256, 256) == Status::null_pointer);
  CHECK(rss::validate_call(x, nullptr, l, 4, ws, 256, 256) == Status::null_pointer);
  CHECK(rss::validate_call(x, y, l, 4, nullptr, 256, 256) == Status::null_pointer);
  CHECK(rss::validate_call(x, y, l, 4, ws, 255, 256) == Status::workspace_too_small);
  CHECK(rss::validate_call(x, y, l, 4, buffer + 513, 256, 256) == Status::misaligned_workspace);
  CHECK(rss::validate_call(x, y, l, 4, nullptr, 0, 0) == Status::success);  // no workspace needed
  CHECK(rss::validate_call(x, y, rss::Layout::contiguous(-2, 3), 4, ws, 256, 256) == Status::negative_size);  // sizes first
  CHECK(rss::validate_call(nullptr, nullptr, rss::Layout::contiguous(0, 3), 4, nullptr, 0, 256) == Status::success);
  CHECK(rss::validate_call(nullptr, nullptr, rss::Layout{3, 0, 0, 0}, 4, nullptr, 0, 256) == Status::success);
}

TEST_CASE("layout validation refuses leading dimensions below cols and extents overflowing 64 bits", "[api][validate][layout]") {
  CHECK(rss::validate_layout(rss::Layout::contiguous(2, 3), 4) == Status::success);
  CHECK(rss::validate_layout(rss::Layout{2, 3, 5, 7}, 4) == Status::success);
  CHECK(rss::validate_layout(rss::Layout{2, 3, 2, 3}, 4) == Status::invalid_layout);
  CHECK(rss::validate_layout(rss::Layout{2, 3, 3, 2}, 4) == Status::invalid_layout);
  CHECK(rss::validate_layout(rss::Layout{2, 3, 0, 0}, 2) == Status::invalid_layout);
  CHECK(rss::validate_layout(rss::Layout{2, 3, -1, 3}, 4) == Status::invalid_layout);
  CHECK(rss::validate_layout(rss::Layout{1, 3, 1, 3}, 4) == Status::invalid_layout);  // one row: ld still checked
  CHECK(rss::validate_layout(rss::Layout{-1, 3, 3, 3}, 4) == Status::negative_size);
  CHECK(rss::validate_layout(rss::Layout{2, -3, 3, 3}, 4) == Status::negative_size);
  // Empty layouts pass with any leading dimension.
  CHECK(rss::validate_layout(rss::Layout{0, 3, 0, 0}, 4) == Status::success);
  CHECK(rss::validate_layout(rss::Layout{3, 0, 0, 0}, 4) == Status::success);

  // rows * cols fits, but (rows - 1) * ld + cols does not.
  const std::int64_t max = std::numeric_limits<std::int64_t>::max();
  CHECK(rss::validate_layout(rss::Layout{1 << 20, 8, std::int64_t{1} << 45, 8}, 4) == Status::size_overflow);
  CHECK(rss::validate_layout(rss::Layout{1 << 20, 8, 8, std::int64_t{1} << 45}, 4) == Status::size_overflow);
  CHECK(rss::validate_layout(rss::Layout{2, 8, max, 8}, 1) == Status::size_overflow);
  CHECK(rss::validate_layout(rss::Layout{1 << 20, 8, std::int64_t{1} << 40, 8}, 4) == Status::success);  // 2^62 bytes
  // A single row never multiplies ld: any ld >= cols passes.
  CHECK(rss::validate_layout(rss::Layout{1, 8, max, max}, 4) == Status::success);
  // A huge leading dimension with a workspace-free call goes through validate_call too.
  alignas(256) static unsigned char buffer[64];
  CHECK(rss::validate_call(buffer, buffer, rss::Layout{1 << 20, 8, std::int64_t{1} << 45, std::int64_t{1} << 45}, 4,
                           nullptr, 0, 0) == Status::size_overflow);
  CHECK(rss::validate_call(buffer, buffer + 32, rss::Layout{2, 3, 2, 3}, 4, nullptr, 0, 0) == Status::invalid_layout);
}

TEST_CASE("call validation accepts in place and refuses every other overlap", "[api][validate][layout]") {
  alignas(256) static float buffer[4096];
  float* x = buffer;
  const rss::Layout l{4, 10, 16, 16};  // extent: 3 * 16 + 10 = 58 floats
  alignas(256) static unsigned char ws[512];

  SECTION("in place: y == x with the same leading dimension") {
    CHECK(rss::validate_call(x, x, l, 4, ws, 512, 256) == Status::success);
    CHECK(rss::validate_call(x, x, rss::Layout::contiguous(4, 10), 4, nullptr, 0, 0) == Status::success);
  }
  SECTION("y == x with a different leading dimension") {
    CHECK(rss::validate_call(x, x, rss::Layout{4, 10, 16, 12}, 4, nullptr, 0, 0) == Status::overlapping_buffers);
    CHECK(rss::validate_call(x, x, rss::Layout{4, 10, 10, 16}, 4, nullptr, 0, 0) == Status::overlapping_buffers);
  }
  SECTION("partial overlap of x and y, either way round") {
    CHECK(rss::validate_call(x, x + 1, l, 4, nullptr, 0, 0) == Status::overlapping_buffers);
    CHECK(rss::validate_call(x + 1, x, l, 4, nullptr, 0, 0) == Status::overlapping_buffers);
    CHECK(rss::validate_call(x, x + 57, l, 4, nullptr, 0, 0) == Status::overlapping_buffers);  // last x element
    CHECK(rss::validate_call(x + 57, x, l, 4, nullptr, 0, 0) == Status::overlapping_buffers);
    CHECK(rss::validate_call(x, x + 16, l, 4, nullptr, 0, 0) == Status::overlapping_buffers);  // shifted by a row
    // y starting one element past x's extent is disjoint.
    CHECK(rss::validate_call(x, x + 58, l, 4, nullptr, 0, 0) == Status::success);
    CHECK(rss::validate_call(x + 58, x, l, 4, nullptr, 0, 0) == Status::success);
    // Bytes, not elements: a 2-byte element extent is half as long.
    CHECK(rss::validate_call(x, x + 29, l, 2, nullptr, 0, 0) == Status::success);
    CHECK(rss::validate_call(x, x + 28, l, 2, nullptr, 0, 0) == Status::overlapping_buffers);
  }
  SECTION("the workspace may overlap neither x nor y") {
    float* y = buffer + 1024;
    unsigned char* base = reinterpret_cast<unsigned char*>(buffer);
    CHECK(rss::validate_call(x, y, l, 4, ws, 512, 256) == Status::success);
    CHECK(rss::validate_call(x, y, l, 4, base, 512, 256) == Status::overlapping_buffers);           // at x
    CHECK(rss::validate_call(x + 64, y, l, 4, base, 512, 512) == Status::overlapping_buffers);      // x inside it
    CHECK(rss::validate_call(x, y, l, 4, base + 4096, 512, 256) == Status::overlapping_buffers);    // at y
    CHECK(rss::validate_call(x, x, l, 4, base, 512, 256) == Status::overlapping_buffers);           // in place, at x
    CHECK(rss::validate_call(x + 64, y, l, 4, base, 256, 256) == Status::success);  // [0, 256) ends where x starts
    CHECK(rss::validate_call(x, y, l, 4, base + 256, 512, 256) == Status::success);  // starts past x's 232 bytes
  }
}

TEST_CASE("row statistics validation: present, 4-byte aligned, overlapping neither x, y nor the workspace",
          "[api][validate][statistics]") {
  alignas(256) static unsigned char buffer[8192];
  const rss::Layout l = rss::Layout::contiguous(4, 100);  // x, y: 400 floats each
  const void* x = buffer;
  const void* y = buffer + 2048;
  const void* ws = buffer + 4096;
  auto* stats = reinterpret_cast<rss::RowStatistics*>(buffer + 6144);  // 4 rows x 12 bytes
  const auto check = [&](rss::RowStatistics* s, std::size_t required = 256) {
    return rss::validate_statistics(s, x, y, l, 4, ws, required);
  };
  CHECK(check(stats) == Status::success);
  CHECK(check(nullptr) == Status::null_pointer);
  CHECK(check(reinterpret_cast<rss::RowStatistics*>(buffer + 6146)) == Status::misaligned_statistics);
  CHECK(check(reinterpret_cast<rss::RowStatistics*>(buffer + 1600 - 8)) == Status::overlapping_buffers);  // x's end
  CHECK(check(reinterpret_cast<rss::RowStatistics*>(buffer + 2048 + 400)) == Status::overlapping_buffers);  // in y
  CHECK(check(reinterpret_cast<rss::RowStatistics*>(buffer + 4096 + 200)) == Status::overlapping_buffers);
  CHECK(check(reinterpret_cast<rss::RowStatistics*>(buffer + 4096 + 200), 0) == Status::success);  // no workspace
  CHECK(check(reinterpret_cast<rss::RowStatistics*>(buffer + 1600)) == Status::success);  // just past x
  CHECK(rss::validate_statistics(nullptr, x, y, rss::Layout::contiguous(0, 100), 4, ws, 256) == Status::success);
}

TEST_CASE("the workspace carver answers the size query and lays out aligned buffers identically", "[api][workspace]") {
  rss::WorkspaceCarver counter;
  counter.take<float>(10);
  counter.take<double>(3);
  counter.take<char>(1);
  REQUIRE_FALSE(counter.overflowed());
  CHECK(counter.bytes() == 3 * rss::workspace_alignment);

  alignas(256) static unsigned char base[3 * 256];
  rss::WorkspaceCarver carver(base);
  auto* a = carver.take<float>(10);
  auto* b = carver.take<double>(3);
  auto* c = carver.take<char>(1);
  CHECK(reinterpret_cast<unsigned char*>(a) == base);
  CHECK(reinterpret_cast<unsigned char*>(b) == base + 256);
  CHECK(reinterpret_cast<unsigned char*>(c) == base + 512);
  CHECK(carver.bytes() == counter.bytes());

  rss::WorkspaceCarver huge;
  huge.take<double>(std::numeric_limits<std::int64_t>::max());
  CHECK(huge.overflowed());
}

TEST_CASE("launch lists count every launch, store the first ones, and count a graph as one host launch", "[api][launch]") {
  rss::LaunchList list;
  for (int i = 0; i < rss::LaunchList::capacity + 5; ++i) list.add({"k", 1, 32, 0, i == 3, 0});
  CHECK(list.size == rss::LaunchList::capacity);
  CHECK(list.kernels == rss::LaunchList::capacity + 5);
  CHECK(list.host_launches == rss::LaunchList::capacity + 5);
  CHECK(list.any_cooperative());
  rss::LaunchList graph;
  graph.graph = true;
  for (int i = 0; i < 9; ++i) graph.add({"node", 1, 32, 0, false, 0});
  CHECK(graph.kernels == 9);
  CHECK(graph.host_launches == 0);  // the caller records the one graph launch
  CHECK_FALSE(graph.any_cooperative());
}

TEST_CASE("every status and strategy has a distinct, non-empty name", "[api][status]") {
  std::set<std::string> messages;
  for (int s = 0; s <= static_cast<int>(Status::misaligned_statistics); ++s) {
    const char* m = rss::status_message(static_cast<Status>(s));
    REQUIRE(m != nullptr);
    CHECK(std::strlen(m) > 0);
    messages.insert(m);
  }
  CHECK(messages.size() == static_cast<std::size_t>(Status::misaligned_statistics) + 1);
  std::set<std::string> names;
  for (rss::Strategy s : rss::all_strategies) names.insert(rss::strategy_name(s));
  CHECK(names.size() == sizeof(rss::all_strategies) / sizeof(rss::all_strategies[0]));
  CHECK(names.count("unknown") == 0);
  CHECK(names.count("cluster_row") == 1);
  CHECK(names.count("automatic") == 0);  // automatic picks among the concrete strategies: not one of them
  CHECK(std::string(rss::strategy_name(rss::Strategy::automatic)) == "automatic");
  // Names read back to their strategies (the bench and tools parse them).
  for (rss::Strategy s : rss::all_strategies) {
    rss::Strategy back = rss::Strategy::automatic;
    CHECK(rss::strategy_from_name(rss::strategy_name(s), &back));
    CHECK(back == s);
  }
  rss::Strategy untouched = rss::Strategy::baseline;
  CHECK_FALSE(rss::strategy_from_name("control_no_retention", &untouched));  // a control, not a strategy
  CHECK_FALSE(rss::strategy_from_name(nullptr, &untouched));
  CHECK(untouched == rss::Strategy::baseline);
  CHECK(std::string(rss::strategy_name(static_cast<rss::Strategy>(99))) == "unknown");
}

TEST_CASE("every storage type has a name and a size", "[api][dtype]") {
  CHECK(std::string(rss::dtype_name(rss::DType::fp32)) == "fp32");
  CHECK(std::string(rss::dtype_name(rss::DType::bf16)) == "bf16");
  CHECK(std::string(rss::dtype_name(rss::DType::fp16)) == "fp16");
  CHECK(rss::dtype_bytes(rss::DType::fp32) == 4);
  CHECK(rss::dtype_bytes(rss::DType::bf16) == 2);
  CHECK(rss::dtype_bytes(rss::DType::fp16) == 2);
}
