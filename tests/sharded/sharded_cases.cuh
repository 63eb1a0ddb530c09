#pragma once
// Cases shared by the two GPU tests of rss/sharded (one process driving every GPU, and one process per
// GPU). A case is a global rows x cols matrix cut into column shards; each rank checks its own shard
// against the CPU reference of the whole row (double) and against the single-GPU library's result on
// the whole row, on fresh random inputs with 0xFF-poisoned outputs. Failures are collected as text,
// so both a Catch2 test and a plain main can report them.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "rss/reference/cpu_reference.hpp"
#include "rss/reference/tolerance.hpp"
#include "rss/rss.cuh"
#include "rss/sharded/sharded.cuh"

namespace sharded_test {

/// Conversions exactly as the kernels make them.
template <class T>
float to_float(T v) { return rss::StorageTraits<T>::to_float(v); }
template <class T>
T from_float(float v) { return rss::StorageTraits<T>::from_float(v); }

inline std::uint64_t fresh_seed() {
  std::random_device d;
  return (static_cast<std::uint64_t>(d()) << 32) ^ d();
}

/// Failures of one rank, as text.
struct Report {
  int failures = 0;
  std::ostringstream text;
  void fail(const std::string& what) {
    ++failures;
    text << "  FAIL " << what << "\n";
  }
};

struct Case {
  std::string name;
  std::int64_t rows;
  std::vector<std::int64_t> widths;  // one per rank
  std::int64_t pad_x = 0, pad_y = 0;  // leading dimension = width + pad
  bool in_place = false;
  bool specials = false;   // NaN / +inf / -inf / constant rows
  int misalign = 0;        // x and y start this many elements past an aligned address
  bool device_refuses = false;  // a share longer than a cluster holds: nccl_device says not_admissible
};

/// Shard widths of `cols` over `world` ranks, the first ones one element wider or narrower (uneven).
inline std::vector<std::int64_t> uneven(std::int64_t cols, int world) {
  std::vector<std::int64_t> w(static_cast<std::size_t>(world), cols / world);
  std::int64_t rest = cols - (cols / world) * world;
  for (int r = 0; r < world && rest > 0; ++r, --rest) ++w[static_cast<std::size_t>(r)];
  if (world >= 2 && w[1] > 1 && cols % world == 0) {  // make even splits uneven too: +1 / -1
    ++w[0];
    --w[1];
  }
  return w;
}

inline std::vector<Case> cases(int world) {
  std::vector<Case> c;
  c.push_back({"llama_32x128256", 32, uneven(128256, world)});
  c.push_back({"odd_5x10", 5, uneven(10, world)});
  c.push_back({"odd_3x2000", 3, uneven(2000, world)});
  c.push_back({"one_element_per_rank", 2, std::vector<std::int64_t>(static_cast<std::size_t>(world), 1)});
  Case strided{"strided_9x1013", 9, uneven(1013, world)};
  strided.pad_x = 3;
  strided.pad_y = 5;
  c.push_back(strided);
  Case in_place{"in_place_4x4096", 4, uneven(4096, world)};
  in_place.in_place = true;
  c.push_back(in_place);
  Case specials{"nan_inf_rows_8x6001", 8, uneven(6001, world)};
  specials.specials = true;
  c.push_back(specials);
  Case misaligned{"unaligned_3x2057", 3, uneven(2057, world)};
  misaligned.misalign = 1;
  c.push_back(misaligned);
  c.push_back({"many_rows_3000x1000", 3000, uneven(1000, world)});
  c.push_back({"article_64x131072", 64, uneven(131072, world)});
  std::vector<std::int64_t> empty_last = uneven(777, world);
  if (world >= 2) {
    empty_last[0] += empty_last.back();
    empty_last.back() = 0;
  }
  c.push_back({"empty_shard_4x777", 4, empty_last});
  Case long_share{"long_share_2x(150000 per rank)", 2, std::vector<std::int64_t>(static_cast<std::size_t>(world), 150000)};
  long_share.widths[0] += 1;
  long_share.device_refuses = true;
  c.push_back(long_share);
  return c;
}

inline std::int64_t total(const std::vector<std::int64_t>& w) {
  std::int64_t s = 0;
  for (auto v : w) s += v;
  return s;
}

/// Global input: row i is s_i (u + o_i), never zero; special rows hold a NaN, +inf, -inf (each in a
/// different rank's shard when there are several) or all-equal values.
inline std::vector<float> make_input(const Case& c, std::uint64_t seed) {
  const std::int64_t cols = total(c.widths);
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<float> u(-4.0f, 4.0f), scale(0.25f, 4.0f), offset(-2.0f, 2.0f);
  std::vector<float> x(static_cast<std::size_t>(c.rows * cols));
  for (std::int64_t i = 0; i < c.rows; ++i) {
    const float s = scale(gen), o = offset(gen);
    for (std::int64_t j = 0; j < cols; ++j) {
      float v = s * (u(gen) + o);
      x[static_cast<std::size_t>(i * cols + j)] = v == 0.0f ? 1e-3f : v;
    }
  }
  if (c.specials && c.rows >= 4) {
    const std::int64_t last = cols - 1;
    x[static_cast<std::size_t>(0 * cols + last)] = NAN;        // last rank's shard
    x[static_cast<std::size_t>(1 * cols + 0)] = INFINITY;      // first rank's shard
    x[static_cast<std::size_t>(2 * cols + cols / 2)] = -INFINITY;
    for (std::int64_t j = 0; j < cols; ++j) x[static_cast<std::size_t>(3 * cols + j)] = 1.5f;
  }
  return x;
}

inline cudaMemLocation host_location() {
  cudaMemLocation l{};
  l.type = cudaMemLocationTypeHost;
  return l;
}
inline cudaMemLocation device_location(int device) {
  cudaMemLocation l{};
  l.type = cudaMemLocationTypeDevice;
  l.id = device;
  return l;
}
/// cudaMemAdvise with a location (CUDA 13's form; 12.2 to 12.9 name it cudaMemAdvise_v2).
inline cudaError_t advise(const void* p, std::size_t bytes, cudaMemoryAdvise advice, cudaMemLocation where) {
#if CUDART_VERSION >= 13000
  return cudaMemAdvise(p, bytes, advice, where);
#else
  return cudaMemAdvise_v2(p, bytes, advice, where);
#endif
}

#define SHARDED_CUDA(report, call)                                                       \
  do {                                                                                   \
    const cudaError_t e_ = (call);                                                       \
    if (e_ != cudaSuccess) {                                                             \
      (report).fail(std::string(#call) + ": " + cudaGetErrorString(e_));                \
      return;                                                                            \
    }                                                                                    \
  } while (0)

/// One rank's buffers and operator for one case.
template <class T>
struct Rank {
  int rank = 0;
  int device = 0;
  cudaStream_t stream = nullptr;
  rss::Layout layout{};
  void* x_alloc = nullptr;
  void* y_alloc = nullptr;
  T* x = nullptr;
  T* y = nullptr;
  std::int64_t offset = 0;  // first global column of the shard
  bool y_on_host = false;   // y in managed memory kept on the host: readable after a device fault ended the context
  rss::ShardedOperator<T> op;
  rss::Status init_status = rss::Status::success;

  ~Rank() {
    if (x_alloc != nullptr) cudaFree(x_alloc);
    if (y_alloc != nullptr) cudaFree(y_alloc);
    if (stream != nullptr) cudaStreamDestroy(stream);
  }

  /// Allocates and fills the shard (current device = this rank's), poisons y.
  void prepare(const Case& c, const std::vector<float>& global, Report& report) {
    SHARDED_CUDA(report, cudaSetDevice(device));
    if (stream == nullptr) SHARDED_CUDA(report, cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    const std::int64_t w = c.widths[static_cast<std::size_t>(rank)];
    offset = 0;
    for (int r = 0; r < rank; ++r) offset += c.widths[static_cast<std::size_t>(r)];
    layout = {c.rows, w, w + c.pad_x, c.in_place ? w + c.pad_x : w + c.pad_y};
    const std::size_t x_elems = static_cast<std::size_t>(c.rows * layout.ld_x) + 16;
    const std::size_t y_elems = static_cast<std::size_t>(c.rows * layout.ld_y) + 16;
    SHARDED_CUDA(report, cudaMalloc(&x_alloc, x_elems * sizeof(T)));
    x = static_cast<T*>(x_alloc) + c.misalign;
    if (c.in_place) {
      y = x;
    } else {
      if (y_on_host) {
        SHARDED_CUDA(report, cudaMallocManaged(&y_alloc, y_elems * sizeof(T)));
        SHARDED_CUDA(report, advise(y_alloc, y_elems * sizeof(T), cudaMemAdviseSetPreferredLocation, host_location()));
        SHARDED_CUDA(report, advise(y_alloc, y_elems * sizeof(T), cudaMemAdviseSetAccessedBy, device_location(device)));
      } else {
        SHARDED_CUDA(report, cudaMalloc(&y_alloc, y_elems * sizeof(T)));
      }
      SHARDED_CUDA(report, cudaMemset(y_alloc, 0xFF, y_elems * sizeof(T)));
      y = static_cast<T*>(y_alloc) + c.misalign;
    }
    const std::int64_t cols = total(c.widths);
    std::vector<T> host(static_cast<std::size_t>(c.rows * layout.ld_x), from_float<T>(NAN));
    for (std::int64_t i = 0; i < c.rows; ++i)
      for (std::int64_t j = 0; j < w; ++j)
        host[static_cast<std::size_t>(i * layout.ld_x + j)] = from_float<T>(global[static_cast<std::size_t>(i * cols + offset + j)]);
    SHARDED_CUDA(report, cudaMemcpy(x, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  }

  /// Checks the shard against the double reference of the whole rows and the single-GPU result.
  void verify(const Case& c, const std::vector<float>& global, const std::string& label, Report& report) {
    SHARDED_CUDA(report, cudaSetDevice(device));
    SHARDED_CUDA(report, cudaStreamSynchronize(stream));
    const std::int64_t cols = total(c.widths), w = layout.cols;
    std::vector<T> out(static_cast<std::size_t>(c.rows * layout.ld_y));
    if (w > 0) SHARDED_CUDA(report, cudaMemcpy(out.data(), y, out.size() * sizeof(T), cudaMemcpyDeviceToHost));

    // The input as stored (rounded to T), the reference in double, and the single-GPU library's result.
    std::vector<T> stored(static_cast<std::size_t>(c.rows * cols));
    std::vector<double> in(stored.size());
    for (std::size_t k = 0; k < stored.size(); ++k) {
      stored[k] = from_float<T>(global[k]);
      in[k] = to_float(stored[k]);
    }
    std::vector<double> ref(stored.size());
    rss::reference::rms_scaled_softmax(in.data(), ref.data(), c.rows, cols);

    T* gx = nullptr;
    T* gy = nullptr;
    void* ws = nullptr;
    std::size_t bytes = 0;
    SHARDED_CUDA(report, cudaMalloc(&gx, stored.size() * sizeof(T)));
    SHARDED_CUDA(report, cudaMalloc(&gy, stored.size() * sizeof(T)));
    SHARDED_CUDA(report, cudaMemcpy(gx, stored.data(), stored.size() * sizeof(T), cudaMemcpyHostToDevice));
    rss::Status s = rss::workspace_bytes<T>(rss::Strategy::automatic, c.rows, cols, &bytes);
    if (rss::ok(s) && bytes > 0) SHARDED_CUDA(report, cudaMalloc(&ws, bytes));
    if (rss::ok(s)) s = rss::rms_scaled_softmax<T>(rss::Strategy::automatic, gx, gy, c.rows, cols, ws, bytes, stream);
    std::vector<T> single(stored.size());
    SHARDED_CUDA(report, cudaStreamSynchronize(stream));
    SHARDED_CUDA(report, cudaMemcpy(single.data(), gy, single.size() * sizeof(T), cudaMemcpyDeviceToHost));
    cudaFree(gx);
    cudaFree(gy);
    if (ws != nullptr) cudaFree(ws);
    if (!rss::ok(s)) report.fail(label + ": single-GPU rss failed: " + rss::status_message(s));

    const double tol = rss::reference::tolerance(rss::StorageTraits<T>::dtype);
    double worst_ref = 0.0, worst_single = 0.0;
    for (std::int64_t i = 0; i < c.rows; ++i) {
      bool ref_nan = false;
      for (std::int64_t j = 0; j < cols; ++j) ref_nan = ref_nan || std::isnan(ref[static_cast<std::size_t>(i * cols + j)]);
      double d_ref = 0, n_ref = 0, d_single = 0, n_single = 0;
      bool all_nan = true;
      for (std::int64_t j = 0; j < w; ++j) {
        const double v = to_float(out[static_cast<std::size_t>(i * layout.ld_y + j)]);
        const double r = ref[static_cast<std::size_t>(i * cols + offset + j)];
        const double g = to_float(single[static_cast<std::size_t>(i * cols + offset + j)]);
        all_nan = all_nan && std::isnan(v);
        d_ref += (v - r) * (v - r);
        n_ref += r * r;
        d_single += (v - g) * (v - g);
        n_single += g * g;
      }
      if (w == 0) continue;
      if (ref_nan) {
        if (!all_nan) report.fail(label + ": row " + std::to_string(i) + " should be all NaN (the reference is)");
        continue;
      }
      const double e_ref = n_ref > 0 ? std::sqrt(d_ref / n_ref) : std::sqrt(d_ref);
      const double e_single = n_single > 0 ? std::sqrt(d_single / n_single) : std::sqrt(d_single);
      if (!(e_ref <= worst_ref)) worst_ref = e_ref;
      if (!(e_single <= worst_single)) worst_single = e_single;
    }
    if (!(worst_ref <= tol) || !(worst_single <= tol)) {
      std::ostringstream m;
      m << label << ": rank " << rank << " error vs reference " << worst_ref << ", vs single GPU " << worst_single
        << " (tolerance " << tol << ")";
      report.fail(m.str());
    }
    // Padding of y (between cols and ld_y) must be untouched (still poisoned), unless in place.
    if (!c.in_place && c.pad_y > 0 && w > 0) {
      const T poisoned = out[static_cast<std::size_t>(w)];
      const auto bits = [](T v) { unsigned long long b = 0; std::memcpy(&b, &v, sizeof v); return b; };
      const unsigned long long all_ones = sizeof(T) == 4 ? 0xFFFFFFFFull : 0xFFFFull;
      if (bits(poisoned) != all_ones) report.fail(label + ": y's padding was written");
    }
  }
};

template <class T>
const char* type_name() {
  return rss::dtype_name(rss::StorageTraits<T>::dtype);
}

/// A path and, for the device path, how its blocks exchange partials.
struct PathRun {
  rss::ShardedPath path;
  rss::DeviceExchange exchange;
  std::string name() const {
    return std::string(rss::sharded_path_name(path)) +
           (path == rss::ShardedPath::nccl_host ? "" : std::string("/") + rss::device_exchange_name(exchange));
  }
};

inline const PathRun all_paths[] = {
    {rss::ShardedPath::nccl_host, rss::DeviceExchange::flags},
    {rss::ShardedPath::nccl_device, rss::DeviceExchange::flags},
    {rss::ShardedPath::nccl_device, rss::DeviceExchange::lsa_barrier},
    {rss::ShardedPath::automatic, rss::DeviceExchange::flags},
};

/// What a rank expects from initialize() for a case and a path.
inline rss::Status expected_init(const Case& c, rss::ShardedPath p) {
  return c.device_refuses && p == rss::ShardedPath::nccl_device ? rss::Status::not_admissible : rss::Status::success;
}

}  // namespace sharded_test
