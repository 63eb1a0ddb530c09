// What a launch costs before any work: CUDA-event time of one launch of an empty kernel (the median of 200,
// each synchronised) and per launch in a burst of 200, for the launch shapes rss uses: ordinary, cooperative,
// clusters, with and without the long_row strategy's shared memory, and the few-row shapes of cluster_row (256
// threads in clusters of 8 and 16, one row's 16 blocks up to a wave). A diagnostic, never part of the library.
//
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90,code=sm_90 dev/launch_cost.cu -o launch_cost && ./launch_cost
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "launch_cost: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

__global__ void __launch_bounds__(1024, 1) empty1024(int* sink) {
  extern __shared__ int dyn[];
  if (sink != nullptr && threadIdx.x == 0) dyn[0] = sink[blockIdx.x];
}
__global__ void __launch_bounds__(512, 1) empty512(int* sink) {
  extern __shared__ int dyn[];
  if (sink != nullptr && threadIdx.x == 0) dyn[0] = sink[blockIdx.x];
}

__global__ void __launch_bounds__(256) empty256(int* sink) {
  extern __shared__ int dyn[];
  if (sink != nullptr && threadIdx.x == 0) dyn[0] = sink[blockIdx.x];
}

struct Shape {
  const char* what;
  void (*kernel)(int*);
  unsigned threads;
  std::size_t smem;
  bool cooperative;
  unsigned cluster;
  unsigned blocks = 0;  // 0: the SM count and half of it
};

cudaError_t launch(const Shape& s, unsigned blocks, cudaStream_t stream) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(blocks);
  config.blockDim = dim3(s.threads);
  config.dynamicSmemBytes = s.smem;
  config.stream = stream;
  cudaLaunchAttribute attributes[2];
  unsigned n = 0;
  if (s.cooperative) {
    attributes[n].id = cudaLaunchAttributeCooperative;
    attributes[n].val.cooperative = 1;
    ++n;
  }
  if (s.cluster > 1) {
    attributes[n].id = cudaLaunchAttributeClusterDimension;
    attributes[n].val.clusterDim.x = s.cluster;
    attributes[n].val.clusterDim.y = 1;
    attributes[n].val.clusterDim.z = 1;
    ++n;
  }
  config.attrs = attributes;
  config.numAttrs = n;
  int* sink = nullptr;
  return cudaLaunchKernelEx(&config, s.kernel, sink);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main() {
  int sms = 0;
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "sm count");
  const std::size_t big = 200 * 1024;
  check(cudaFuncSetAttribute(empty1024, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(big)), "attr");
  check(cudaFuncSetAttribute(empty512, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(big)), "attr");
  check(cudaFuncSetAttribute(empty1024, cudaFuncAttributeNonPortableClusterSizeAllowed, 1), "attr");
  check(cudaFuncSetAttribute(empty256, cudaFuncAttributeMaxDynamicSharedMemorySize, 33 * 1024), "attr");
  check(cudaFuncSetAttribute(empty256, cudaFuncAttributeNonPortableClusterSizeAllowed, 1), "attr");
  const Shape shapes[] = {
      {"ordinary 1024 threads, no smem", empty1024, 1024, 0, false, 1},
      {"ordinary 1024 threads, 200 KB smem", empty1024, 1024, big, false, 1},
      {"cooperative 512 threads, 200 KB", empty512, 512, big, true, 1},
      {"cooperative 1024 threads, 200 KB", empty1024, 1024, big, true, 1},
      {"cooperative 1024, 200 KB, cluster 2", empty1024, 1024, big, true, 2},
      {"cooperative 1024, 200 KB, cluster 4", empty1024, 1024, big, true, 4},
      {"ordinary 1024, 200 KB, cluster 2", empty1024, 1024, big, false, 2},
      {"ordinary 1024, 200 KB, cluster 4", empty1024, 1024, big, false, 4},
      // cluster_row's few-row launches: one row (16 blocks), 8 rows (128), 64 rows of 8 blocks (512)
      {"ordinary 256, no smem, no cluster", empty256, 256, 0, false, 1, 16},
      {"ordinary 256, no smem, cluster 16", empty256, 256, 0, false, 16, 16},
      {"ordinary 256, no smem, cluster 8", empty256, 256, 0, false, 8, 16},
      {"ordinary 256, no smem, no cluster", empty256, 256, 0, false, 1, 128},
      {"ordinary 256, no smem, cluster 16", empty256, 256, 0, false, 16, 128},
      {"ordinary 256, 33 KB smem, no cluster", empty256, 256, 33 * 1024, false, 1, 512},
      {"ordinary 256, 33 KB smem, cluster 8", empty256, 256, 33 * 1024, false, 8, 512},
  };
  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "event");
  check(cudaEventCreate(&b), "event");
  std::printf("%d SMs; one launch: event us (median of 200), host us to completion; burst of 200: event us per launch\n",
              sms);
  for (const Shape& s : shapes) {
    for (unsigned blocks : {s.blocks > 0 ? s.blocks : static_cast<unsigned>(sms), s.blocks > 0 ? 0u : static_cast<unsigned>(sms / 2)}) {
      if (blocks == 0 || blocks % s.cluster != 0) continue;
      if (launch(s, blocks, stream) != cudaSuccess) {
        std::printf("%-40s %4u blocks: refused: %s\n", s.what, blocks, cudaGetErrorString(cudaGetLastError()));
        continue;
      }
      check(cudaStreamSynchronize(stream), "warm-up");
      std::vector<double> one, host;
      for (int r = 0; r < 200; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        check(cudaEventRecord(a, stream), "record");
        check(launch(s, blocks, stream), "launch");
        check(cudaEventRecord(b, stream), "record");
        check(cudaEventSynchronize(b), "sync");
        host.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
        float ms = 0;
        check(cudaEventElapsedTime(&ms, a, b), "elapsed");
        one.push_back(ms * 1000.0);
      }
      check(cudaEventRecord(a, stream), "record");
      for (int r = 0; r < 200; ++r) check(launch(s, blocks, stream), "launch");
      check(cudaEventRecord(b, stream), "record");
      check(cudaEventSynchronize(b), "sync");
      float ms = 0;
      check(cudaEventElapsedTime(&ms, a, b), "elapsed");
      std::printf("%-40s %4u blocks: one %6.2f us (host %6.2f), burst %6.2f us per launch\n", s.what, blocks,
                  median(one), median(host), ms * 1000.0 / 200);
    }
  }
  return 0;
}
