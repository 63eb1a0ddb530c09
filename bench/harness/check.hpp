#pragma once
// One CUDA error check for the bench programs: a failed call prints the program's name, the call and CUDA's
// message, and exits with code 1 (a measurement cannot go on after a CUDA error).
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

namespace rss_bench {

inline const char* program_name = "rss_bench";  // run_suite sets it from the suite's Program

[[noreturn]] inline void die(const char* what, cudaError_t err) {
  std::fprintf(stderr, "%s: %s: %s\n", program_name, what, cudaGetErrorString(err));
  std::exit(1);
}

}  // namespace rss_bench

#define BENCH_CUDA(call)                                    \
  do {                                                      \
    const cudaError_t e_ = (call);                          \
    if (e_ != cudaSuccess) ::rss_bench::die(#call, e_);     \
  } while (0)
