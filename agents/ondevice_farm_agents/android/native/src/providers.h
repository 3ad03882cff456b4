// Execution providers by the farm's backend name: cpu, xnnpack, nnapi, qnn.
#pragma once

#include "args.h"
#include "ort_run.h"

namespace farm {

// Configure `options` for o.ep with o.ep_options (and o.ep_library for a plugin EP). Throws
// std::runtime_error with a clear reason where this build or library cannot provide it.
void append_provider(const Ort& ort, OrtEnv* env, OrtSessionOptions* options, const Options& o);

}  // namespace farm
