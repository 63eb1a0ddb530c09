#pragma once
// Shapes and storage types of the benches: the --shapes / --dtypes syntax and each suite's default table
// (docs/protocol.md). A new shape is one entry in a list below.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "rss/types.hpp"

namespace rss_bench {

/// The forward's shapes: the article's (one row width, few rows), model shapes, single long rows (the last evicts).
inline constexpr const char* forward_shapes =
    "1x131072,8x131072,64x131072,32x128256,4096x4096,16384x8192,4096x32768,1x1048576,1x4194304,1x16777216";
inline constexpr const char* backward_shapes = "32x128256,4096x4096,16384x8192,4096x32768,1x131072,64x131072";
inline constexpr const char* sharded_shapes = "32x128256,4096x128256,64x131072,1x16777216";

struct Shape {
  std::int64_t rows = 0, cols = 0;
  rss::DType dtype = rss::DType::fp32;
  /// "ROWSxCOLS" for fp32, "ROWSxCOLS:bf16" otherwise (the --shapes syntax, and the records' names).
  std::string label() const {
    const std::string base = std::to_string(rows) + "x" + std::to_string(cols);
    return dtype == rss::DType::fp32 ? base : base + ":" + rss::dtype_name(dtype);
  }
  bool operator==(const Shape& o) const { return rows == o.rows && cols == o.cols && dtype == o.dtype; }
  std::size_t elements() const { return static_cast<std::size_t>(rows * cols); }
  std::size_t bytes() const { return elements() * static_cast<std::size_t>(rss::dtype_bytes(dtype)); }
};

inline std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= s.size()) {
    const std::size_t end = s.find(sep, start);
    out.push_back(s.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

/// "fp32" -> DType; false for any other text.
inline bool parse_dtype(const std::string& name, rss::DType* out) {
  for (const rss::DType d : {rss::DType::fp32, rss::DType::bf16, rss::DType::fp16}) {
    if (name == rss::dtype_name(d)) {
      *out = d;
      return true;
    }
  }
  return false;
}

/// The shapes of a --shapes list: an item ROWSxCOLS:DTYPE is that shape in that type, a bare ROWSxCOLS runs in every
/// type of `dtypes`, type by type (all of the first type's shapes, then the second's...), each shape once. "" when
/// every item parses, else what is wrong.
inline std::string parse_shapes(const std::string& list, const std::string& dtypes, std::vector<Shape>* out) {
  std::vector<rss::DType> types;
  for (const std::string& d : split(dtypes, ',')) {
    rss::DType t;
    if (!parse_dtype(d, &t)) return "--dtypes: unknown storage type '" + d + "' (want fp32, bf16 or fp16)";
    types.push_back(t);
  }
  std::vector<std::pair<Shape, bool>> items;  // the shape, and whether it named its type
  for (const std::string& item : split(list, ',')) {
    long long r = 0, c = 0;
    int used = 0;
    const int fields = std::sscanf(item.c_str(), "%lldx%lld%n", &r, &c, &used);
    // The whole item must parse: "4096x4096x" or "8x131072:bf" are errors, not silently trimmed.
    const std::string rest = fields == 2 ? item.substr(static_cast<std::size_t>(used)) : "?";
    Shape s{r, c, rss::DType::fp32};
    if (fields != 2 || r < 1 || c < 1 || (!rest.empty() && (rest[0] != ':' || !parse_dtype(rest.substr(1), &s.dtype)))) {
      return "--shapes: bad shape '" + item + "' (want ROWSxCOLS or ROWSxCOLS:fp32|bf16|fp16)";
    }
    items.push_back({s, !rest.empty()});
  }
  const auto add = [out](const Shape& s) {  // once: a shape named twice would give duplicate records
    if (std::find(out->begin(), out->end(), s) == out->end()) out->push_back(s);
  };
  for (std::size_t t = 0; t < types.size(); ++t) {
    for (const auto& [s, typed] : items) {
      if (!typed) add({s.rows, s.cols, types[t]});
      else if (t == 0) add(s);
    }
  }
  return "";
}

}  // namespace rss_bench
