#include "impl.cuh"
RSS_TORCH_DEFINE(bf16, __nv_bfloat16)
