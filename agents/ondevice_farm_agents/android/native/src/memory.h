// Resident memory of this process from /proc/self/status (Linux and Android alike).
#pragma once

#include <cstdint>
#include <string>

namespace farm {

// A field of /proc/self/status in bytes ("VmRSS", "VmHWM"); -1 where the kernel does not say.
int64_t status_bytes(const std::string& field);

}  // namespace farm
