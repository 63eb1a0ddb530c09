#pragma once
// Host-side conversions between float and the storage types the tests exercise (fp32, bf16, fp16).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace rss_test {

inline float to_float(float v) { return v; }
inline float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
inline float to_float(__half v) { return __half2float(v); }

template <class T>
T from_float(float v);
template <>
inline float from_float<float>(float v) { return v; }
template <>
inline __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <>
inline __half from_float<__half>(float v) { return __float2half_rn(v); }

template <class T>
double to_double(T v) { return to_float(v); }

}  // namespace rss_test
