#pragma once
// rss: rms_scaled_softmax for CUDA, as composable device phases assembled into launch strategies.
//
//   rss/status.hpp, rss/types.hpp      status codes, storage types, strategy names
//   rss/reference/                      CPU reference (double) and the accuracy tolerances
//   rss/phases/                         block-scope device phases: row statistics, exp-sum, normalise
//   rss/sync/                           grid-wide and row-scoped barriers, cluster (DSMEM) reductions
//   rss/planner/                        pure host planning: residency admission, launch splitting, eviction,
//                                       cluster configurations
//   rss/strategies/                     phases assembled into launches: baseline, baseline_graph,
//                                       local_fusion, megakernel (grid / row barrier, controls, block_row),
//                                       cluster_row
//   rss/tuning/                         the automatic strategy's choice and the shipped tuning tables
//   rss/api/                            the public host API (one call, rss::Operator), argument checks,
//                                       launch metadata
#include "rss/status.hpp"
#include "rss/types.hpp"
#include "rss/reference/cpu_reference.hpp"
#include "rss/reference/tolerance.hpp"
#include "rss/api/rms_scaled_softmax.cuh"
