#pragma once
// The one place where accuracy is stated. Error is per row, ||y - ref|| / ||ref||, against the
// double-precision reference.
//
// The guarantee, for every storage type T: rss computes y in fp32 arithmetic (sums of squares and long
// sums wider) and rounds it to T once. With y32 the fp32 result and round() rounding to nearest,
// |round(y32) - ref| <= |round(ref) - ref| + 2 |y32 - ref| element by element, so per row
//
//     error(y) <= error(round_T(ref)) + 2 * fp32_tolerance
//
// where error(round_T(ref)) is what T itself costs: the exact answer correctly rounded to T. For fp32
// that term is about 6e-8 and fp32_tolerance bounds the total; for bf16 and fp16 it dominates (about
// 2e-3 and 2.5e-4 for ordinary rows, and up to 100% when the outputs fall below fp16's smallest
// subnormal, 2^-24: a row of 2^25 equal values has every exact output 2^-25, which rounds to 0).
#include <cmath>
#include <cstdint>

#include "rss/types.hpp"

namespace rss::reference {

/// fp32 arithmetic's bound: far below 1e-5, and the whole tolerance for fp32 storage.
inline constexpr double fp32_tolerance = 2e-6;
/// A convenience bound for bf16 / fp16 rows whose outputs stay in the normal range (bf16 has 8 bits of
/// significand); storage_tolerance is the exact statement.
inline constexpr double half_tolerance = 1e-2;

constexpr double tolerance(DType t) { return t == DType::fp32 ? fp32_tolerance : half_tolerance; }

/// The tolerance of one row of `cols` reference values stored as T: the error of the correctly
/// rounded exact answer plus twice the fp32 bound. `round_to_storage(double) -> double` rounds a value
/// to T and back (the identity rounded through float for fp32).
template <class Round>
double storage_tolerance(const double* ref, std::int64_t cols, Round round_to_storage) {
  double diff = 0.0, norm = 0.0;
  for (std::int64_t j = 0; j < cols; ++j) {
    const double d = round_to_storage(ref[j]) - ref[j];
    diff += d * d;
    norm += ref[j] * ref[j];
  }
  return std::sqrt(diff) / std::sqrt(norm) + 2.0 * fp32_tolerance;
}

}  // namespace rss::reference
