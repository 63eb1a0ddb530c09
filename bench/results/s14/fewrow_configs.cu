// cluster_row's configurations on the few-row shapes through the public API: a diagnostic, never part of the
// library. oddwidth_s12/oddwidth_ab.cu's timing loop (included), run for automatic and then for each
// configuration named on the command line (THREADSxELEMSxCLUSTER with s: a shared-memory tile, p: two tiles,
// pipelined over the resident looping grid, nothing: registers), CUDA events against cudaMemcpyAsync of the
// same bytes, median us per call. Built against several trees' headers (the grid rules differ) and alternated.
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -I TREE/include bench/results/s14/fewrow_configs.cu -o fewrow_configs
//   ./fewrow_configs "64x131072 bf16" 256x64x8s 256x64x8p 256x32x16p
#define ODDWIDTH_AB_NO_MAIN
#include "../oddwidth_s12/oddwidth_ab.cu"

#include <cstring>

namespace {

bool parse(const char* text, rss::ClusterConfig* c) {
  char suffix = 0;
  const int n = std::sscanf(text, "%dx%dx%d%c", &c->threads, &c->elems_per_thread, &c->cluster_size, &suffix);
  if (n < 3) return false;
  c->residence = suffix == 's'   ? rss::RowResidence::shared_memory
                 : suffix == 'p' ? rss::RowResidence::shared_memory_pipelined
                                 : rss::RowResidence::registers;
  return true;
}

void measure_shape(const char* shape) {
  long long rows = 0, cols = 0;
  char type[8] = {};
  if (std::sscanf(shape, "%lldx%lld %7s", &rows, &cols, type) != 3) {
    std::fprintf(stderr, "bad shape %s\n", shape);
    std::exit(2);
  }
  if (std::strcmp(type, "bf16") == 0) measure<__nv_bfloat16>("bf16", rows, cols);
  else if (std::strcmp(type, "fp16") == 0) measure<__half>("fp16", rows, cols);
  else measure<float>("fp32", rows, cols);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s \"ROWSxCOLS TYPE\" [CONFIG ...]\n", argv[0]);
    return 2;
  }
  std::printf("== automatic\n");
  measure_shape(argv[1]);
  for (int i = 2; i < argc; ++i) {
    rss::ClusterConfig c;
    if (!parse(argv[i], &c)) {
      std::fprintf(stderr, "bad configuration %s\n", argv[i]);
      return 2;
    }
    config = rss::Config{rss::Strategy::cluster_row, c};
    std::printf("== %s\n", argv[i]);
    measure_shape(argv[1]);
  }
  return 0;
}
