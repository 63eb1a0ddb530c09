// The forward's few-row shapes through the public API: a diagnostic, never part of the library.
// oddwidth_s12/oddwidth_ab.cu's timing loop (included) over the Performance IV issue's few-row shapes and one
// many-row control; built against a tree's headers, it times the default operator (automatic) against
// cudaMemcpyAsync of the same bytes, CUDA events, median us per call, and prints a checksum of y.
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -I TREE/include bench/results/s14/fewrow_ab.cu -o fewrow_ab
//   ./fewrow_ab ["64x131072 bf16"]   (one shape only)
#define ODDWIDTH_AB_NO_MAIN
#include "../oddwidth_s12/oddwidth_ab.cu"

int main(int argc, char** argv) {
  if (argc > 1) only = argv[1];
  for (const auto& [rows, cols] : {std::pair{64, 131072}, std::pair{32, 128256}, std::pair{8, 131072}, std::pair{1, 131072}}) {
    measure<__nv_bfloat16>("bf16", rows, cols);
    measure<__half>("fp16", rows, cols);
    measure<float>("fp32", rows, cols);
  }
  measure<__nv_bfloat16>("bf16", 16384, 8192);
  return 0;
}
