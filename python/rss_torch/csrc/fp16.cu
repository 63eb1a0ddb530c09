#include "impl.cuh"
RSS_TORCH_DEFINE(fp16, __half)
