#pragma once
// rss: rms_scaled_softmax for CUDA, as composable device phases assembled into launch strategies.
//
//   rss/status.hpp, types.hpp, strategy.hpp  status codes, storage types and layouts, strategy names
//   rss/launch_info.hpp, validate.hpp         launch metadata; argument checks (pure host)
//   rss/device_info.hpp, device.cuh           the device description, read once per device
//   rss/reference/                            CPU reference (double) and the accuracy tolerances
//   rss/phases/                               block-scope device phases: row statistics, exp-sum, normalise
//   rss/sync/                                 grid-wide and row-scoped barriers, cluster (DSMEM) reductions
//   rss/planner/                              pure host planning: residency admission, launch splitting,
//                                             eviction, cluster configurations
//   rss/strategies/                           one file per strategy (the interface: strategies/call.cuh),
//                                             and the registry that lists them
//   rss/tuning/                               the automatic strategy's choice and the shipped tuning tables
//   rss/api/                                  the public host API: rss::Operator, the one call
#include "rss/status.hpp"
#include "rss/strategy.hpp"
#include "rss/types.hpp"
#include "rss/device_info.hpp"
#include "rss/launch_info.hpp"
#include "rss/reference/cpu_reference.hpp"
#include "rss/reference/tolerance.hpp"
#include "rss/api/rms_scaled_softmax.cuh"
#include "rss/api/plans.cuh"
