#pragma once
// The one place where accuracy requirements are stated. Error is per row, ||y - ref|| / ||ref||,
// against the double-precision reference.
#include "rss/types.hpp"

namespace rss::reference {

/// fp32 storage and fp32 arithmetic: far below SPEC's 1e-5.
inline constexpr double fp32_tolerance = 2e-6;
/// bf16 / fp16 storage with fp32 arithmetic: dominated by the output's rounding (bf16 has 8 bits).
inline constexpr double half_tolerance = 1e-2;

constexpr double tolerance(DType t) { return t == DType::fp32 ? fp32_tolerance : half_tolerance; }

}  // namespace rss::reference
