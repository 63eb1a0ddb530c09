#pragma once
// The benchmarked shapes (SPEC §3), one table: a new shape is one line.
#include <cstdint>
#include <string>
#include <vector>

namespace rss_bench {

struct Shape {
  std::int64_t rows, cols;
  std::string label() const { return std::to_string(rows) + "x" + std::to_string(cols); }
};

inline const std::vector<Shape>& spec_shapes() {
  static const std::vector<Shape> shapes{
      {1, 131072}, {8, 131072}, {64, 131072},                      // the article's shapes
      {32, 128256}, {4096, 4096}, {16384, 8192}, {4096, 32768},    // model shapes
      {1, 1048576}, {1, 4194304}, {1, 16777216},                   // one long row; the last evicts
  };
  return shapes;
}

}  // namespace rss_bench
