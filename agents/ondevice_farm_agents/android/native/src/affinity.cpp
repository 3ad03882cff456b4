#include "affinity.h"

#include <dirent.h>
#include <sched.h>
#include <sys/types.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>

namespace farm {
namespace {

int to_cpu(const std::string& item, const std::string& whole) {
  char* end = nullptr;
  long value = std::strtol(item.c_str(), &end, 10);
  if (item.empty() || *end != '\0' || value < 0 || value >= CPU_SETSIZE) {
    throw std::runtime_error("--cpus takes CPU numbers (0-" + std::to_string(CPU_SETSIZE - 1) +
                             ") like 4,5,6-7, not '" + whole + "'");
  }
  return static_cast<int>(value);
}

std::vector<int> mask_cpus(const cpu_set_t& mask) {
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &mask)) cpus.push_back(cpu);
  }
  return cpus;
}

}  // namespace

std::vector<int> parse_cpu_list(const std::string& text) {
  std::vector<int> cpus;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    size_t dash = item.find('-');
    if (dash == std::string::npos) {
      cpus.push_back(to_cpu(item, text));
    } else {
      int first = to_cpu(item.substr(0, dash), text);
      int last = to_cpu(item.substr(dash + 1), text);
      if (last < first) throw std::runtime_error("--cpus range '" + item + "' runs backwards");
      for (int cpu = first; cpu <= last; ++cpu) cpus.push_back(cpu);
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

std::string cpu_list_text(const std::vector<int>& cpus) {
  std::string text;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!text.empty()) text += ",";
    text += std::to_string(cpus[i]);
    if (j > i) text += "-" + std::to_string(cpus[j]);
    i = j + 1;
  }
  return text;
}

void pin_process(const std::vector<int>& cpus) {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  for (int cpu : cpus) CPU_SET(cpu, &mask);
  const std::string asked = cpu_list_text(cpus);
  const std::string online = online_cpus();
  const std::string where = online.empty() ? "" : " (online: " + online + ")";
  if (sched_setaffinity(0, sizeof(mask), &mask) != 0) {
    throw std::runtime_error("cannot pin to CPUs " + asked + ": " + std::strerror(errno) + where);
  }
  const std::vector<int> got = current_affinity();
  if (got != cpus) {
    throw std::runtime_error("asked for CPUs " + asked + " but the kernel pinned to " + cpu_list_text(got) +
                             where);
  }
}

std::vector<int> current_affinity() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof(mask), &mask) != 0) {
    throw std::runtime_error(std::string("sched_getaffinity: ") + std::strerror(errno));
  }
  return mask_cpus(mask);
}

std::vector<int> process_threads_affinity() {
  cpu_set_t all;
  CPU_ZERO(&all);
  DIR* tasks = opendir("/proc/self/task");
  if (tasks == nullptr) return current_affinity();
  while (dirent* entry = readdir(tasks)) {
    if (entry->d_name[0] == '.') continue;
    cpu_set_t mask;
    CPU_ZERO(&mask);
    // a thread may have ended since the listing: skip it
    if (sched_getaffinity(static_cast<pid_t>(std::atoi(entry->d_name)), sizeof(mask), &mask) != 0) continue;
    CPU_OR(&all, &all, &mask);
  }
  closedir(tasks);
  return mask_cpus(all);
}

std::string online_cpus() {
  std::ifstream file("/sys/devices/system/cpu/online");
  std::string text;
  std::getline(file, text);
  return text;
}

}  // namespace farm
