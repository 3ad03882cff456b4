#include "memory.h"

#include <fstream>
#include <sstream>

namespace farm {

int64_t status_bytes(const std::string& field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(field + ":", 0) == 0) {
      std::istringstream fields(line.substr(field.size() + 1));
      int64_t kib = -1;
      fields >> kib;
      return kib < 0 ? -1 : kib * 1024;
    }
  }
  return -1;
}

}  // namespace farm
