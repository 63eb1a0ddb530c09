#pragma once
// Storage types and their conversion to the fp32 compute type. Phases are written against
// StorageTraits<T>, so bf16 and fp16 plug in without touching them. A new storage type is a
// specialisation here plus its row in rss/types.hpp's dtype table.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "rss/types.hpp"

namespace rss {
namespace detail {
template <class T>
inline constexpr bool always_false = false;
}  // namespace detail

/// How kernels meet a storage type: its DType and its conversions to and from the fp32 compute type
/// (host and device). Public, so that code fused around rss, its tests and its benches convert exactly
/// as rss does. An unsupported storage type stops the build here, with one message; the members keep
/// the rest of the instantiation quiet.
template <class T>
struct StorageTraits {
  static_assert(detail::always_false<T>, "rss: unsupported storage type; use float, __nv_bfloat16 or __half");
  static constexpr DType dtype = DType::fp32;
  __host__ __device__ static float to_float(T) { return 0.0f; }
  __host__ __device__ static T from_float(float) { return T{}; }
};

template <>
struct StorageTraits<float> {
  static constexpr DType dtype = DType::fp32;
  __host__ __device__ static float to_float(float v) { return v; }
  __host__ __device__ static float from_float(float v) { return v; }
};

template <>
struct StorageTraits<__nv_bfloat16> {
  static constexpr DType dtype = DType::bf16;
  __host__ __device__ static float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
  __host__ __device__ static __nv_bfloat16 from_float(float v) { return __float2bfloat16_rn(v); }
};

template <>
struct StorageTraits<__half> {
  static constexpr DType dtype = DType::fp16;
  __host__ __device__ static float to_float(__half v) { return __half2float(v); }
  __host__ __device__ static __half from_float(float v) { return __float2half_rn(v); }
};

/// The DType of a storage type: float, __nv_bfloat16 or __half.
template <class T>
inline constexpr DType dtype_of = StorageTraits<T>::dtype;

namespace detail {
/// Elements of T in one 16-byte access.
template <class T>
inline constexpr int vector_width = 16 / static_cast<int>(sizeof(T));

/// Element e of a vector, as float, from the 32-bit word that holds it (16-bit elements: the even one in the low
/// half). For bf16 one shift or one mask: converting a Vector<T>'s 16-bit elements one by one cost the high half a
/// byte permute and a shift (SASS; bench/NOTES.md).
template <class T>
__device__ __forceinline__ float element_of_word(unsigned word, int e) {
  if constexpr (sizeof(T) == 4) {
    return __uint_as_float(word);
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __uint_as_float(e % 2 ? word & 0xffff0000u : word << 16);
  } else {
    return StorageTraits<T>::to_float(__ushort_as_half(static_cast<unsigned short>(e % 2 ? word >> 16 : word & 0xffffu)));
  }
}
}  // namespace detail

}  // namespace rss
