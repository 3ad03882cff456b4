// ONNX Runtime through its C API, initialised at the newest API version both the headers and
// the linked library have, and the measurement of one job with it.
#pragma once

#include <stdexcept>
#include <string>

#include "args.h"
#include "onnxruntime_c_api.h"

namespace farm {

struct Ort {
  const OrtApi* api = nullptr;
  int api_version = 0;
  std::string version;  // the library's, e.g. "1.32.0"
  std::string build_info;

  // Throws std::runtime_error with ORT's message when `status` is an error (and frees it).
  void check(OrtStatus* status, const std::string& what) const;
};

// The library's API at min(headers, library); throws where the library is too old for this runner.
Ort init_ort();

// The stage a failure happened in, for error.json ("load", "first_inference", ...).
struct StageError : std::runtime_error {
  StageError(const std::string& stage, const std::string& message)
      : std::runtime_error(message), stage(stage) {}
  std::string stage;
};

// Load, first inference, warm-up, timed runs, outputs, profiled pass: writes result.json,
// outputs/<i>.npy and profile.json into o.out_dir. Throws StageError.
void measure(const Ort& ort, const Options& o);

}  // namespace farm
