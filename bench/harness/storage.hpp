#pragma once
// Storage types on the bench's host side, through rss's own conversions (rss::StorageTraits): what is stored is
// what the kernels read, bit for bit. One dispatch from a DType to its C++ type.
#include <cstring>
#include <vector>

#include "rss/storage.cuh"
#include "rss/types.hpp"

namespace rss_bench {

template <class T>
struct StorageTag {
  using type = T;
};

/// f(StorageTag<T>{}) for the C++ type T of `dtype`.
template <class F>
decltype(auto) with_storage(rss::DType dtype, F&& f) {
  switch (dtype) {
    case rss::DType::bf16: return f(StorageTag<__nv_bfloat16>{});
    case rss::DType::fp16: return f(StorageTag<__half>{});
    default: return f(StorageTag<float>{});
  }
}

/// v rounded to T and read back: the value T holds.
template <class T>
float stored_value(float v) {
  return rss::StorageTraits<T>::to_float(rss::StorageTraits<T>::from_float(v));
}

/// x as `dtype` stores it: the raw bytes, and (when seen is not null) the values they hold, as float.
inline std::vector<unsigned char> store(rss::DType dtype, const std::vector<float>& x, std::vector<float>* seen) {
  return with_storage(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    std::vector<unsigned char> raw(x.size() * sizeof(T));
    if (seen != nullptr) seen->resize(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      const T v = rss::StorageTraits<T>::from_float(x[i]);
      std::memcpy(raw.data() + i * sizeof(T), &v, sizeof(T));
      if (seen != nullptr) (*seen)[i] = rss::StorageTraits<T>::to_float(v);
    }
    return raw;
  });
}

/// `count` values of `dtype` in raw bytes, as float.
inline std::vector<float> load(rss::DType dtype, const void* raw, std::size_t count) {
  return with_storage(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    std::vector<float> out(count);
    for (std::size_t i = 0; i < count; ++i) {
      T v;
      std::memcpy(&v, static_cast<const unsigned char*>(raw) + i * sizeof(T), sizeof(T));
      out[i] = rss::StorageTraits<T>::to_float(v);
    }
    return out;
  });
}

}  // namespace rss_bench
