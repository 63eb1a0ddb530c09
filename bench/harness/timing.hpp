#pragma once
// The per-sample timing of every suite: warm-up calls, then one host completion time per Google Benchmark
// iteration (the launch call, then the wait for completion), then, where a stream is given, one batched CUDA event
// interval divided by its calls; and the counters a session's records carry (schema rss-records/2).
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <chrono>
#include <string>
#include <vector>

#include "check.hpp"
#include "options.hpp"
#include "shapes.hpp"

namespace rss_bench {

struct Samples {
  std::vector<double> host_us;
  double device_us = -1.0;  // < 0: not measured
};

/// call() launches once and returns an error message or nullptr; wait() waits for completion (cudaSuccess or the
/// error). A failure ends the run as a Google Benchmark error. With `events_on`, `batched` back-to-back calls there
/// give device_us.
template <class Call, class Wait>
Samples time_calls(benchmark::State& st, Call&& call, Wait&& wait, cudaStream_t events_on = nullptr,
                   bool with_events = false) {
  Samples m;
  for (int i = 0; i < g_options.warmup; ++i) (void)call();
  BENCH_CUDA(wait());
  for (auto _ : st) {
    const auto t0 = std::chrono::steady_clock::now();
    const char* failed = call();
    const cudaError_t err = wait();
    const auto t1 = std::chrono::steady_clock::now();
    if (failed != nullptr || err != cudaSuccess) {
      st.SkipWithError(failed != nullptr ? failed : cudaGetErrorString(err));
      return m;
    }
    const double seconds = std::chrono::duration<double>(t1 - t0).count();
    st.SetIterationTime(seconds);
    m.host_us.push_back(seconds * 1e6);
  }
  if (!with_events) return m;
  const int batched = g_options.iterations;
  cudaEvent_t start, stop;
  BENCH_CUDA(cudaEventCreate(&start));
  BENCH_CUDA(cudaEventCreate(&stop));
  BENCH_CUDA(cudaEventRecord(start, events_on));
  for (int i = 0; i < batched; ++i) (void)call();
  BENCH_CUDA(cudaEventRecord(stop, events_on));
  BENCH_CUDA(cudaEventSynchronize(stop));
  float ms = 0.0f;
  BENCH_CUDA(cudaEventElapsedTime(&ms, start, stop));
  m.device_us = 1000.0 * ms / batched;
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return m;
}

/// A run that cannot be measured: recorded as an error with its reason (Google Benchmark wants its loop run).
inline void skip_run(benchmark::State& st, const std::string& why) {
  st.SkipWithError(why.c_str());
  for (auto _ : st) {
  }
}

/// A session's record of one run: every sample (host_us/0..), device_us, the shape, round and position.
inline void record_samples(benchmark::State& st, const Samples& m, const Shape& shape, int round, int position) {
  if (g_options.session == 0) return;
  st.counters["rows"] = static_cast<double>(shape.rows);
  st.counters["cols"] = static_cast<double>(shape.cols);
  st.counters["round"] = round;
  st.counters["position"] = position;
  if (m.device_us >= 0) st.counters["device_us"] = m.device_us;
  for (std::size_t i = 0; i < m.host_us.size(); ++i) st.counters["host_us/" + std::to_string(i)] = m.host_us[i];
}

/// What a call launches, from the library's description: kernels, host launches, cooperative, active blocks per SM
/// (the occupancy query's, a capacity), logical bytes (counted by the strategy that runs) and evicted tiles; with
/// Google Benchmark's bytes_per_second over x read once and y written once (`io_bytes`).
template <class LaunchList>
void launch_counters(benchmark::State& st, const LaunchList& l, std::int64_t logical_bytes, std::int64_t io_bytes) {
  st.counters["kernels"] = static_cast<double>(l.kernels);
  st.counters["launches"] = static_cast<double>(l.host_launches);
  st.counters["cooperative"] = l.any_cooperative() ? 1 : 0;
  st.counters["active_blocks_per_sm"] = l.size > 0 ? l.items[0].blocks_per_sm : 0;
  st.counters["logical_bytes"] = static_cast<double>(logical_bytes);
  st.counters["evicted_tiles"] = static_cast<double>(l.evicted_tiles);
  st.counters["logical_bw"] =
      benchmark::Counter(static_cast<double>(logical_bytes) * st.iterations(), benchmark::Counter::kIsRate);
  st.SetBytesProcessed(io_bytes * static_cast<std::int64_t>(st.iterations()));
}

}  // namespace rss_bench
