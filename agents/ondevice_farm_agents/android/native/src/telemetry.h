// What the unit's kernel exposes about its silicon, read from sysfs at one moment: CPU
// frequencies, thermal zones, battery power. Android and Linux boards expose the same files.
#pragma once

#include <string>
#include <vector>

#include "json.h"

namespace farm {

struct Telemetry {
  JsonObject cpu_freq_mhz;
  //: devfreq device (e.g. 1f000000.mali, 3d00000.qcom,kgsl-3d0) -> its current clock
  JsonObject gpu_freq_mhz;
  JsonObject temperatures_c;
  //: battery power draw in milliwatts (|current_now| x voltage_now); negative: not readable
  double power_mw = -1;
  int cpus = 0;
  int gpus = 0;
  std::string devfreq_dir;
  int zones = 0;
};

// `devfreq_dir`: where the GPU's devfreq device is looked for (/sys/class/devfreq on a phone).
Telemetry read_telemetry(const std::string& devfreq_dir);
JsonObject telemetry_json(const Telemetry& t);
// What this unit's sysfs could not tell, in words (empty where everything was readable).
std::vector<std::string> telemetry_gaps(const Telemetry& t);

}  // namespace farm
