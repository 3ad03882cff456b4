// The runner's command line, parsed into one value.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace farm {

struct Options {
  std::string model;
  std::string out_dir;
  //: graph input name -> .npy file
  std::vector<std::pair<std::string, std::string>> inputs;
  //: cpu, xnnpack, nnapi or qnn
  std::string ep = "cpu";
  //: provider options, key -> value, in the order given
  std::vector<std::pair<std::string, std::string>> ep_options;
  //: a plugin EP library (e.g. Qualcomm's libonnxruntime_providers_qnn.so), registered before use
  std::string ep_library;
  bool disable_cpu_fallback = false;
  int warmup = 5;
  int runs = 50;
  //: profiled runs in a separate session; the first of them is the cold one the host leaves out
  int profile_runs = 0;
  int threads = 0;
  bool version_only = false;
};

// Throws std::runtime_error with a one-line reason on bad arguments.
Options parse_args(int argc, char** argv);

const char* usage();

}  // namespace farm
