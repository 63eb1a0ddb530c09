// CPU-only checks of rss/sharded's pure host parts: the ranks' agreement, shard offsets and both
// paths' plans.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

#include <vector>

#include "rss/sharded/plan.hpp"

namespace {

std::vector<rss::RankShape> table(std::int64_t rows, std::vector<std::int64_t> widths, std::int64_t global) {
  std::vector<rss::RankShape> t(widths.size());
  for (std::size_t r = 0; r < widths.size(); ++r) {
    t[r].rank = static_cast<std::int64_t>(r);
    t[r].world = static_cast<std::int64_t>(widths.size());
    t[r].rows = rows;
    t[r].local_cols = widths[r];
    t[r].global_cols = global;
  }
  return t;
}

}  // namespace

TEST_CASE("ranks agree when rows, global length, dtype and path match and the widths add up", "[sharded][cpu]") {
  auto t = table(32, {64129, 64127}, 128256);
  CHECK(rss::check_agreement(t.data(), 2) == rss::ShardAgreement::agreed);
  CHECK(rss::shard_offset(t.data(), 0) == 0);
  CHECK(rss::shard_offset(t.data(), 1) == 64129);
  CHECK(rss::max_local_cols(t.data(), 2) == 64129);
  auto empty_rank = table(4, {777, 0}, 777);
  CHECK(rss::check_agreement(empty_rank.data(), 2) == rss::ShardAgreement::agreed);
}

TEST_CASE("every disagreement has its own verdict, the same on every rank", "[sharded][cpu]") {
  auto t = table(32, {500, 500}, 1000);
  t[1].rows = 31;
  CHECK(rss::check_agreement(t.data(), 2) == rss::ShardAgreement::rows_differ);
  t = table(32, {500, 500}, 1000);
  t[1].global_cols = 1001;
  CHECK(rss::check_agreement(t.data(), 2) == rss::ShardAgreement::total_cols_differ);
  t = table(32, {500, 400}, 1000);
  CHECK(rss::check_agreement(t.data(), 2) == rss::ShardAgreement::cols_do_not_add_up);
  t = table(32, {500, -1}, 499);
  CHECK(rss::check_agreement(t.data(), 2) == rss::ShardAgreement::cols_do_not_add_up);
  t = table(32, {INT64_MAX, 2}, 1);
  CHECK(rss::check_agreement(t.data(), 2) == rss::ShardAgreement::cols_do_not_add_up);  // no overflow
  t = table(32, {500, 500}, 1000);
  t[0].dtype = static_cast<std::int64_t>(rss::DType::bf16);
  CHECK(rss::check_agreement(t.data(), 2) == rss::ShardAgreement::dtype_differs);
  t = table(32, {500, 500}, 1000);
  t[1].path = static_cast<std::int64_t>(rss::ShardedPath::nccl_device);
  CHECK(rss::check_agreement(t.data(), 2) == rss::ShardAgreement::path_differs);
  t = table(32, {500, 500}, 1000);
  t[1].exchange = static_cast<std::int64_t>(rss::DeviceExchange::lsa_barrier);
  CHECK(rss::check_agreement(t.data(), 2) == rss::ShardAgreement::path_differs);
  t = table(32, {500, 500}, 1000);
  t[1].local_status = static_cast<std::int64_t>(rss::Status::null_pointer);
  CHECK(rss::check_agreement(t.data(), 2) == rss::ShardAgreement::local_refusal);
  t = table(32, {500, 500}, 1000);
  t[1].rank = 0;
  CHECK(rss::check_agreement(t.data(), 2) == rss::ShardAgreement::bad_table);
  t = table(32, {500, 500}, 1000);
  t[0].version = 1;
  CHECK(rss::check_agreement(t.data(), 2) == rss::ShardAgreement::bad_table);
  CHECK(rss::check_agreement(nullptr, 2) == rss::ShardAgreement::bad_table);
}

TEST_CASE("the host path cuts rows into aligned chunks, the same for every rank", "[sharded][cpu]") {
  const rss::HostGeometry one_row = rss::plan_host_geometry(1, 8388608, 132);
  CHECK(one_row.chunk_elems % 8 == 0);
  CHECK(one_row.chunks * one_row.chunk_elems >= 8388608);
  CHECK(one_row.chunks == 528);  // 4 blocks of 512 threads per SM
  const rss::HostGeometry many = rss::plan_host_geometry(4096, 64128, 132);
  CHECK(many.chunks == 1);
  CHECK(many.chunk_elems == 64128);
  const rss::HostGeometry narrow = rss::plan_host_geometry(2, 10, 132);
  CHECK(narrow.chunks == 1);
  CHECK(narrow.chunk_elems >= 10);
}

TEST_CASE("the device path holds a share in one cluster or refuses it", "[sharded][cpu]") {
  // 32 x 128256 over two ranks: 64129 fp32 per rank -> 4 blocks of 512 threads x 32 elements.
  const rss::ShardedDeviceConfig c = rss::plan_device_config(64129, rss::DType::fp32, 8);
  CHECK(c.threads == 512);
  CHECK(c.elems_per_thread == 32);
  CHECK(c.cluster_size == 4);
  CHECK(rss::cluster_chunk(64129, 4) % 8 == 0);
  CHECK(rss::cluster_chunk(64129, 4) * 4 >= 64129);
  CHECK(rss::cluster_chunk(64129, 4) <= 512 * 32);
  // 65536 bf16 fits exactly: 4 x 512 x 32.
  const rss::ShardedDeviceConfig b = rss::plan_device_config(65536, rss::DType::bf16, 8);
  CHECK(b.cluster_size * b.threads * b.elems_per_thread == 65536);
  // Short shares: one block of 256 threads, with the fewest whole vectors per thread that hold the share
  // (the forward cluster_row's rule: one fp32 vector, one bf16 vector).
  const rss::ShardedDeviceConfig s = rss::plan_device_config(7, rss::DType::fp32, 8);
  CHECK(s.cluster_size == 1);
  CHECK(s.threads == 256);
  CHECK(s.elems_per_thread == 4);
  CHECK(rss::plan_device_config(7, rss::DType::bf16, 8).elems_per_thread == 8);
  // Every share is planned exactly as the forward plans a row of that length.
  for (const std::int64_t cols : {7, 1000, 4096, 4097, 64129, 131072}) {
    for (const rss::DType dtype : {rss::DType::fp32, rss::DType::bf16, rss::DType::fp16}) {
      CHECK(rss::plan_device_config(cols, dtype, 8) == rss::default_cluster_config(cols, dtype, 8));
    }
  }
  // 8388608 per rank (1 x 16M over two): no cluster holds it.
  rss::ShardedDevicePlan p;
  CHECK(rss::plan_device_path(1, 8388608, rss::DType::fp32, 8, 100, &p) == rss::Status::not_admissible);
  CHECK(rss::plan_device_path(1, 131073, rss::DType::bf16, 8, 100, &p) == rss::Status::not_admissible);
  CHECK(rss::plan_device_path(1, 131072, rss::DType::fp32, 8, 100, &p) == rss::Status::success);
  // Nothing co-resident: refused; otherwise the grid is min(rows, resident clusters) clusters.
  CHECK(rss::plan_device_path(4096, 64128, rss::DType::fp32, 8, 0, &p) == rss::Status::not_admissible);
  REQUIRE(rss::plan_device_path(4096, 64128, rss::DType::fp32, 8, 66, &p) == rss::Status::success);
  CHECK(p.grid_blocks == 66 * 4);
  REQUIRE(rss::plan_device_path(3, 64128, rss::DType::fp32, 8, 66, &p) == rss::Status::success);
  CHECK(p.grid_blocks == 3 * 4);
  const rss::DeviceWindowLayout w = rss::device_window_layout(264, 2);
  CHECK(w.sums_offset == 264 * 2 * 16);
  CHECK(w.flags_offset == 2 * 264 * 2 * 16);
  CHECK(w.counters_offset == w.flags_offset + 264 * 2 * 32);
  CHECK(w.bytes == w.counters_offset + 264 * 8);
}
