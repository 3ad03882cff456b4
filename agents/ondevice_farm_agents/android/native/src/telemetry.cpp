#include "telemetry.h"
#include "sysfs.h"

#include <dirent.h>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <string>

namespace farm {
namespace {

std::vector<std::string> entries(const std::string& dir, const std::string& prefix) {
  std::vector<std::string> found;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return found;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name.rfind(prefix, 0) == 0) found.push_back(name);
  }
  closedir(d);
  return found;
}

// A devfreq device that is a GPU: Arm Mali (Tensor, Exynos, Dimensity) or Qualcomm Adreno (kgsl).
bool is_gpu(std::string name) {
  for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name.find("mali") != std::string::npos || name.find("kgsl") != std::string::npos ||
         name.find("gpu") != std::string::npos;
}

}  // namespace

Telemetry read_telemetry(const std::string& devfreq_dir) {
  Telemetry t;
  t.devfreq_dir = devfreq_dir;
  for (const auto& cpu : entries("/sys/devices/system/cpu", "cpu")) {
    if (cpu.size() < 4 || cpu.find_first_not_of("0123456789", 3) != std::string::npos) continue;
    double khz = 0;
    if (read_number("/sys/devices/system/cpu/" + cpu + "/cpufreq/scaling_cur_freq", khz)) {
      t.cpu_freq_mhz.add(cpu, khz / 1000.0);
      ++t.cpus;
    }
  }
  for (const auto& device : entries(devfreq_dir, "")) {
    double hz = 0;
    if (device[0] == '.' || !is_gpu(device) || !read_number(devfreq_dir + "/" + device + "/cur_freq", hz)) continue;
    t.gpu_freq_mhz.add(device, hz / 1e6);
    ++t.gpus;
  }
  for (const auto& zone : entries("/sys/class/thermal", "thermal_zone")) {
    double milli = 0;
    if (!read_number("/sys/class/thermal/" + zone + "/temp", milli)) continue;
    std::string type = read_word("/sys/class/thermal/" + zone + "/type");
    t.temperatures_c.add((type.empty() ? zone : type) + ":" + zone.substr(12), milli / 1000.0);
    ++t.zones;
  }
  for (const auto& supply : entries("/sys/class/power_supply", "")) {
    const std::string dir = "/sys/class/power_supply/" + supply;
    if (supply[0] == '.' || read_word(dir + "/type") != "Battery") continue;
    double micro_amps = 0, micro_volts = 0;
    if (read_number(dir + "/current_now", micro_amps) && read_number(dir + "/voltage_now", micro_volts)) {
      t.power_mw = std::fabs(micro_amps) * micro_volts / 1e9;
      break;
    }
  }
  return t;
}

JsonObject telemetry_json(const Telemetry& t) {
  JsonObject out;
  out.add("cpu_freq_mhz", t.cpu_freq_mhz).add("gpu_freq_mhz", t.gpu_freq_mhz).add("temperatures_c", t.temperatures_c);
  if (t.power_mw >= 0) {
    out.add("power_mw", t.power_mw);
  } else {
    out.add_null("power_mw");
  }
  return out;
}

std::vector<std::string> telemetry_gaps(const Telemetry& t) {
  std::vector<std::string> gaps;
  if (t.cpus == 0) gaps.push_back("CPU frequency (no cpufreq in sysfs)");
  if (t.gpus == 0) gaps.push_back("GPU frequency (no Mali or Adreno devfreq device under " + t.devfreq_dir + ")");
  if (t.zones == 0) gaps.push_back("temperatures (no readable thermal zones in sysfs)");
  if (t.power_mw < 0) gaps.push_back("energy (no battery current_now/voltage_now in /sys/class/power_supply)");
  return gaps;
}

}  // namespace farm
