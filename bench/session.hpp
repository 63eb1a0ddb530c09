#pragma once
// Raw records of a session: every sample of every (shape, variant, round), written as the JSON
// schema "rss-records/1" that bench/tools/records.py validates and bench/tools/report.py reads.
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace rss_bench {

struct Record {
  std::int64_t rows = 0, cols = 0;
  std::string dtype = "fp32";
  std::string variant;
  int round = 0, position = 0;
  std::vector<double> host_us, device_us;
  std::int64_t kernels = 0, launches = 0, logical_bytes = 0, evicted_tiles = 0;
  bool cooperative = false;
  int active_blocks_per_sm = 0;  // 0: not queried (written as null)
  double max_rel_err = 0.0;
};

struct SessionContext {
  int session = 0;
  std::string gpu, uuid, toolkit, driver;
  int sm_count = 0;
  int rounds = 0, iterations = 0, warmup = 0;
  std::uint64_t seed = 0, fixture_seed = 0;
  std::string shape_order, fixture_generator, first_elements;
  std::string dtypes = "fp32";  // comma list of the storage types the session measured
};

inline std::string json_number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

inline std::string json_list(const std::vector<double>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + json_number(v[i]);
  return s + "]";
}

/// Writes the records; the session runner adds source hash, clocks and the fixture hash.
inline bool write_records(const std::string& path, const SessionContext& c, const std::vector<Record>& records) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return false;
  std::fprintf(f, "{\"schema\": \"rss-records/1\", \"producer\": \"rss_bench\", \"session\": %d,\n", c.session);
  std::fprintf(f,
               " \"context\": {\"gpu\": \"%s\", \"uuid\": \"%s\", \"driver\": \"%s\", \"toolkit\": \"%s\", "
               "\"sm_count\": %d, \"clocks_start\": {}, \"clocks_end\": {}, \"source_hash\": \"\",\n"
               "  \"config\": {\"rounds\": %d, \"iterations\": %d, \"warmup\": %d, \"seed\": %llu, "
               "\"shape_order\": \"%s\", \"dtype\": \"%s\"},\n"
               "  \"fixture\": {\"seed\": %llu, \"generator\": \"%s\", \"hash\": \"\", \"first_elements\": \"%s\"}},\n",
               c.gpu.c_str(), c.uuid.c_str(), c.driver.c_str(), c.toolkit.c_str(), c.sm_count, c.rounds, c.iterations,
               c.warmup, static_cast<unsigned long long>(c.seed), c.shape_order.c_str(), c.dtypes.c_str(),
               static_cast<unsigned long long>(c.fixture_seed), c.fixture_generator.c_str(), c.first_elements.c_str());
  std::fprintf(f, " \"records\": [\n");
  for (std::size_t i = 0; i < records.size(); ++i) {
    const Record& r = records[i];
    std::fprintf(f,
                 "  {\"rows\": %lld, \"cols\": %lld, \"dtype\": \"%s\", \"variant\": \"%s\", \"round\": %d, "
                 "\"position\": %d, \"kernels\": %lld, \"launches\": %lld, \"cooperative\": %s, "
                 "\"active_blocks_per_sm\": %s, \"logical_bytes\": %lld, \"evicted_tiles\": %lld, "
                 "\"max_rel_err\": %s,\n   \"host_us\": %s,\n   \"device_us\": %s}%s\n",
                 static_cast<long long>(r.rows), static_cast<long long>(r.cols), r.dtype.c_str(), r.variant.c_str(), r.round,
                 r.position, static_cast<long long>(r.kernels), static_cast<long long>(r.launches),
                 r.cooperative ? "true" : "false",
                 r.active_blocks_per_sm > 0 ? std::to_string(r.active_blocks_per_sm).c_str() : "null",
                 static_cast<long long>(r.logical_bytes), static_cast<long long>(r.evicted_tiles),
                 json_number(r.max_rel_err).c_str(), json_list(r.host_us).c_str(), json_list(r.device_us).c_str(),
                 i + 1 < records.size() ? "," : "");
  }
  std::fprintf(f, " ]}\n");
  return std::fclose(f) == 0;
}

}  // namespace rss_bench
