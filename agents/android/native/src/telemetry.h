// What the unit's kernel exposes about its silicon, read from sysfs at one moment: CPU
// frequencies, thermal zones, battery power. Android and Linux boards expose the same files.
#pragma once

#include <string>
#include <vector>

#include "json.h"

namespace farm {

struct Telemetry {
  JsonObject cpu_freq_mhz;
  JsonObject temperatures_c;
  //: battery power draw in milliwatts (|current_now| x voltage_now); negative: not readable
  double power_mw = -1;
  int cpus = 0;
  int zones = 0;
};

Telemetry read_telemetry();
JsonObject telemetry_json(const Telemetry& t);
// What this unit's sysfs could not tell, in words (empty where everything was readable).
std::vector<std::string> telemetry_gaps(const Telemetry& t);

}  // namespace farm
