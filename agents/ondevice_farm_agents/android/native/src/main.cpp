// farm_native_runner: measures one ONNX model the way the farm's host agent does and writes
// result.json, outputs/<i>.npy and profile.json into --out, or error.json and a non-zero exit.
#include <cstdio>
#include <exception>
#include <string>

#include "args.h"
#include "json.h"
#include "ort_run.h"

namespace {

constexpr int kUsageExit = 2;
constexpr int kFailureExit = 1;

void write_error(const std::string& out_dir, const std::string& stage, const std::string& message) {
  std::fprintf(stderr, "farm_native_runner: %s: %s\n", stage.c_str(), message.c_str());
  if (out_dir.empty()) return;
  try {
    farm::write_file_atomically(out_dir + "/error.json",
                                farm::JsonObject().add("stage", stage).add("error", message).str());
  } catch (const std::exception&) {
    // stderr already holds the reason; the caller reads it from the job's output.
  }
}

}  // namespace

int main(int argc, char** argv) {
  farm::Options options;
  try {
    options = farm::parse_args(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "farm_native_runner: %s\n%s", e.what(), farm::usage());
    return kUsageExit;
  }
  try {
    farm::Ort ort = farm::init_ort();
    if (options.version_only) {
      std::printf("farm_native_runner %s (%s) onnxruntime %s API %d\n", FARM_RUNNER_VERSION, FARM_BUILD_TYPE,
                  ort.version.c_str(), ort.api_version);
      return 0;
    }
    farm::measure(ort, options);
    return 0;
  } catch (const farm::StageError& e) {
    write_error(options.out_dir, e.stage, e.what());
  } catch (const std::exception& e) {
    write_error(options.out_dir, "setup", e.what());
  }
  return kFailureExit;
}
