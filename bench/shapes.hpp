#pragma once
// The benchmarked shapes (docs/protocol.md), one table: a new shape is one line. Every shape runs in fp32, bf16
// and fp16 (2-byte I/O, fp32 arithmetic).
#include <cstdint>
#include <string>
#include <vector>

#include "rss/types.hpp"

namespace rss_bench {

struct Shape {
  std::int64_t rows, cols;
  rss::DType dtype = rss::DType::fp32;
  /// "ROWSxCOLS" for fp32, "ROWSxCOLS:bf16" otherwise (the --shapes syntax).
  std::string label() const {
    const std::string base = std::to_string(rows) + "x" + std::to_string(cols);
    return dtype == rss::DType::fp32 ? base : base + ":" + rss::dtype_name(dtype);
  }
};

inline const std::vector<Shape>& spec_shapes() {
  static const std::vector<Shape> shapes = [] {
    const std::vector<Shape> fp32{
        {1, 131072}, {8, 131072}, {64, 131072},                      // the article's shapes
        {32, 128256}, {4096, 4096}, {16384, 8192}, {4096, 32768},    // model shapes
        {1, 1048576}, {1, 4194304}, {1, 16777216},                   // one long row; the last evicts
    };
    std::vector<Shape> all = fp32;
    for (const rss::DType half_width : {rss::DType::bf16, rss::DType::fp16}) {
      for (Shape s : fp32) {
        s.dtype = half_width;
        all.push_back(s);
      }
    }
    return all;
  }();
  return shapes;
}

}  // namespace rss_bench
