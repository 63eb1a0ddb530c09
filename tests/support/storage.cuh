#pragma once
// Host-side conversions between float and the storage types the tests exercise (fp32, bf16, fp16),
// exactly as the kernels make them (rss::StorageTraits).
#include "rss/storage.cuh"

namespace rss_test {

template <class T>
float to_float(T v) { return rss::StorageTraits<T>::to_float(v); }

template <class T>
T from_float(float v) { return rss::StorageTraits<T>::from_float(v); }

template <class T>
double to_double(T v) { return to_float(v); }

}  // namespace rss_test
