#pragma once
// rss/sharded: rms_scaled_softmax over rows whose columns are sharded over the GPUs of an NCCL
// communicator (NCCL 2.28 or newer; link rss::nccl). Not part of the umbrella rss/rss.cuh: the
// single-GPU library never needs NCCL.
//
//   rss/sharded/plan.hpp          pure host: agreement of the ranks, shard offsets, both paths' plans
//   rss/sharded/host_path.cuh     nccl_host: three local kernels and two NCCL all-gathers
//   rss/sharded/device_path.cuh   nccl_device: one kernel, NCCL symmetric window and LSA barriers
//   rss/sharded/operator.cuh      rss::ShardedOperator<T> and rss::run_sharded (one thread, several GPUs)
#include "rss/sharded/nccl_status.hpp"
#include "rss/sharded/operator.cuh"
#include "rss/sharded/plan.hpp"
