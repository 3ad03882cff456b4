// Noise controls the runner applies to itself: the CPUs it runs on (sched_setaffinity), and what
// it reads back of them (the mask every thread of the process ended up with).
#pragma once

#include <string>
#include <vector>

namespace farm {

// "4,5,6-7" -> {4, 5, 6, 7}, sorted and unique. Throws std::runtime_error with a one-line reason.
std::vector<int> parse_cpu_list(const std::string& text);

// "4-7", "0,2", "" for none: the kernel's own list form (Cpus_allowed_list).
std::string cpu_list_text(const std::vector<int>& cpus);

// Pins the whole process (this thread, and every thread started after it) to `cpus`, then reads
// the mask back: throws std::runtime_error with a one-line reason when the kernel refuses it or
// keeps less than was asked (a CPU that is offline, absent, or outside the process's cpuset).
void pin_process(const std::vector<int>& cpus);

// The CPUs the calling thread may run on (sched_getaffinity).
std::vector<int> current_affinity();

// The union of every thread's mask in this process (/proc/self/task/*): what ONNX Runtime's
// worker threads were left with, which may be wider than the main thread's if the runtime pins
// its own threads.
std::vector<int> process_threads_affinity();

// The CPUs the kernel has online (/sys/devices/system/cpu/online), "" where unreadable.
std::string online_cpus();

}  // namespace farm
