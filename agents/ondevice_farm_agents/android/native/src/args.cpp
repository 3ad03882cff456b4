#include "args.h"

#include "affinity.h"

#include <cstdlib>
#include <stdexcept>

namespace farm {
namespace {

int to_count(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  long value = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || value < 0 || value > 1000000) {
    throw std::runtime_error(flag + " takes a count, not '" + text + "'");
  }
  return static_cast<int>(value);
}

double to_seconds(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !(value >= 0) || value > 86400) {
    throw std::runtime_error(flag + " takes seconds, not '" + text + "'");
  }
  return value;
}

std::pair<std::string, std::string> split_pair(const std::string& flag, const std::string& text) {
  auto cut = text.find('=');
  if (cut == std::string::npos || cut == 0) {
    throw std::runtime_error(flag + " takes KEY=VALUE, not '" + text + "'");
  }
  return {text.substr(0, cut), text.substr(cut + 1)};
}

}  // namespace

const char* usage() {
  return "usage: farm_native_runner --model M.onnx --out DIR [--input NAME=FILE.npy]...\n"
         "       [--ep cpu|xnnpack|nnapi|qnn] [--ep-option KEY=VALUE]... [--ep-library LIB.so]\n"
         "       [--disable-cpu-fallback] [--warmup N] [--runs N] [--profile-runs N] [--threads N]\n"
         "       [--cpus LIST (e.g. 4-7 or 4,5,6,7)] [--allow-spinning 0|1]\n"
         "       [--sustained-s SECONDS [--window-s SECONDS] [--devfreq-dir DIR]]\n"
         "       [--battery-dir DIR [--energy-idle-s S] [--energy-min-active-s S] [--energy-sample-ms MS]\n"
         "        [--energy-settle-s S]]\n"
         "       farm_native_runner --version\n";
}

Options parse_args(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (flag == "--version") {
      o.version_only = true;
      continue;
    }
    if (flag == "--disable-cpu-fallback") {
      o.disable_cpu_fallback = true;
      continue;
    }
    if (i + 1 >= argc) throw std::runtime_error(flag + " needs a value");
    std::string value = argv[++i];
    if (flag == "--model") o.model = value;
    else if (flag == "--out") o.out_dir = value;
    else if (flag == "--input") o.inputs.push_back(split_pair(flag, value));
    else if (flag == "--ep") o.ep = value;
    else if (flag == "--ep-option") o.ep_options.push_back(split_pair(flag, value));
    else if (flag == "--ep-library") o.ep_library = value;
    else if (flag == "--warmup") o.warmup = to_count(flag, value);
    else if (flag == "--runs") o.runs = to_count(flag, value);
    else if (flag == "--profile-runs") o.profile_runs = to_count(flag, value);
    else if (flag == "--threads") o.threads = to_count(flag, value);
    else if (flag == "--cpus") o.cpus = parse_cpu_list(value);
    else if (flag == "--allow-spinning") {
      if (value != "0" && value != "1") throw std::runtime_error("--allow-spinning takes 0 or 1, not '" + value + "'");
      o.allow_spinning = value == "1" ? 1 : 0;
    }
    else if (flag == "--sustained-s") o.sustained_s = to_seconds(flag, value);
    else if (flag == "--window-s") o.window_s = to_seconds(flag, value);
    else if (flag == "--devfreq-dir") o.devfreq_dir = value;
    else if (flag == "--battery-dir") o.battery_dir = value;
    else if (flag == "--energy-idle-s") o.energy_idle_s = to_seconds(flag, value);
    else if (flag == "--energy-min-active-s") o.energy_min_active_s = to_seconds(flag, value);
    else if (flag == "--energy-sample-ms") o.energy_sample_ms = to_seconds(flag, value);
    else if (flag == "--energy-settle-s") o.energy_settle_s = to_seconds(flag, value);
    else throw std::runtime_error("unknown option " + flag);
  }
  if (o.version_only) return o;
  if (o.model.empty() || o.out_dir.empty()) throw std::runtime_error("--model and --out are required");
  if (o.threads == 0 && !o.cpus.empty()) {
    o.threads = static_cast<int>(o.cpus.size());
    o.threads_from_cpus = true;
  }
  if (o.runs < 1) throw std::runtime_error("--runs must be at least 1");
  if (o.sustained_s > 0 && o.window_s <= 0) throw std::runtime_error("--window-s must be positive");
  if (!o.battery_dir.empty() && (o.energy_sample_ms < 1 || o.energy_idle_s <= 0)) {
    throw std::runtime_error("--energy-sample-ms must be at least 1 and --energy-idle-s positive");
  }
  if (o.ep != "cpu" && o.ep != "xnnpack" && o.ep != "nnapi" && o.ep != "qnn") {
    throw std::runtime_error("--ep must be cpu, xnnpack, nnapi or qnn, not '" + o.ep + "'");
  }
  return o;
}

}  // namespace farm
