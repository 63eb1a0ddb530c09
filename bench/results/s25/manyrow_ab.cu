// The forward's many-row shapes through the public API: a diagnostic, never part of the library.
// oddwidth_s12/oddwidth_ab.cu's timing loop (included) over the Performance IV issue's many-row shapes (the
// targets of 1.05x the limit) and two few-row controls; built against a tree's headers, it times the default
// operator (automatic) against cudaMemcpyAsync of the same bytes, CUDA events, median us per call, and prints a
// checksum of y (two trees whose sums run in the same order agree to about one unit of the storage type).
//
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I TREE/include bench/results/s25/manyrow_ab.cu -o manyrow_ab
//   ./manyrow_ab ["16384x8192 bf16"]   (one shape only)
#define ODDWIDTH_AB_NO_MAIN
#include "../oddwidth_s12/oddwidth_ab.cu"

int main(int argc, char** argv) {
  if (argc > 1) only = argv[1];
  for (const auto& [rows, cols] : {std::pair{16384, 8192}, std::pair{4096, 32768}, std::pair{4096, 4096}}) {
    measure<__nv_bfloat16>("bf16", rows, cols);
    measure<__half>("fp16", rows, cols);
    measure<float>("fp32", rows, cols);
  }
  measure<__nv_bfloat16>("bf16", 64, 131072);
  measure<__nv_bfloat16>("bf16", 32, 128256);
  return 0;
}
