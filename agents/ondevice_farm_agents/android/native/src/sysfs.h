// Reading one value from a sysfs file: the runner's telemetry and its battery sampler both do.
#pragma once

#include <fstream>
#include <string>

namespace farm {

// The first number in `path`; false where the file is missing or holds none.
inline bool read_number(const std::string& path, double& value) {
  std::ifstream in(path);
  if (!in) return false;
  in >> value;
  return static_cast<bool>(in);
}

// The first line of `path`; empty where the file is missing.
inline std::string read_word(const std::string& path) {
  std::ifstream in(path);
  std::string word;
  std::getline(in, word);
  return word;
}

}  // namespace farm
