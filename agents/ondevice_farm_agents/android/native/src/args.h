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
  //: pin the process to these CPUs before ONNX Runtime starts a thread (empty: the OS places it)
  std::vector<int> cpus;
  //: session.intra_op.allow_spinning: 0 or 1 (-1: the runtime's default, which is on)
  int allow_spinning = -1;
  //: --threads was not given but --cpus was: threads is one per pinned CPU. ONNX Runtime's default
  //: count pins each of its workers to a core of its own choosing, outside the mask as often as not.
  bool threads_from_cpus = false;
  //: after the timed runs, run back to back for this long, in windows of window_s (0: no phase)
  double sustained_s = 0;
  double window_s = 5;
  //: where the kernel lists devfreq devices: a GPU's (Mali, Adreno kgsl) cur_freq is read per window
  std::string devfreq_dir = "/sys/class/devfreq";
  //: a battery's sysfs directory (e.g. /sys/class/power_supply/battery): sample its current_now and
  //: voltage_now over an idle window before the timed runs and during them (empty: no energy)
  std::string battery_dir;
  double energy_idle_s = 3;
  //: the timed runs are followed by untimed ones until the active window lasts this long
  double energy_min_active_s = 3;
  double energy_sample_ms = 50;
  //: a pause before the idle window that is not part of it (the warm-up's load fading)
  double energy_settle_s = 1;
  bool version_only = false;
};

// Throws std::runtime_error with a one-line reason on bad arguments.
Options parse_args(int argc, char** argv);

const char* usage();

}  // namespace farm
