#pragma once
// Storage types and their conversion to the fp32 compute type. Phases are written against
// StorageTraits<T>, so bf16 and fp16 plug in without touching them.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "rss/types.hpp"

namespace rss::detail {

template <class T>
struct StorageTraits;  // undefined: an unsupported storage type is a compile error

template <>
struct StorageTraits<float> {
  static constexpr DType dtype = DType::fp32;
  __host__ __device__ static float to_float(float v) { return v; }
  __host__ __device__ static float from_float(float v) { return v; }
};

template <>
struct StorageTraits<__nv_bfloat16> {
  static constexpr DType dtype = DType::bf16;
  __device__ static float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
  __device__ static __nv_bfloat16 from_float(float v) { return __float2bfloat16_rn(v); }
};

template <>
struct StorageTraits<__half> {
  static constexpr DType dtype = DType::fp16;
  __device__ static float to_float(__half v) { return __half2float(v); }
  __device__ static __half from_float(float v) { return __float2half_rn(v); }
};

/// Elements of T in one 16-byte access.
template <class T>
inline constexpr int vector_width = 16 / static_cast<int>(sizeof(T));

}  // namespace rss::detail
