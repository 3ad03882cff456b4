// Energy during the timed runs: the battery's current_now and voltage_now sampled on a thread of
// their own over an idle window before the timed runs and over the runs themselves. The runner
// only records; the host subtracts the idle baseline and divides by the inferences
// (ondevice_farm.analysis.energy), so the arithmetic and its sign conventions live in one place.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "args.h"
#include "json.h"

namespace farm {

class EnergyRecorder {
 public:
  explicit EnergyRecorder(const Options& o);
  ~EnergyRecorder();
  EnergyRecorder(const EnergyRecorder&) = delete;
  EnergyRecorder& operator=(const EnergyRecorder&) = delete;

  bool asked() const { return asked_; }
  // Asked for (--battery-dir) and the battery's files were readable at the start.
  bool enabled() const { return enabled_; }
  // Starts sampling, sleeps the settle time (not part of the baseline) and the idle window.
  void idle_window();
  void begin_active();
  double active_elapsed_s() const;
  void end_active(int inferences, int timed_runs);
  // Stops sampling; what was recorded, or {"unavailable": reason}.
  JsonObject json();

 private:
  using Clock = std::chrono::steady_clock;
  double since_origin(Clock::time_point t) const;
  void sample_loop();
  void stop();

  const Options& o_;
  bool asked_ = false;
  bool enabled_ = false;
  std::string unavailable_;
  std::string status_;
  Clock::time_point origin_;
  Clock::time_point active_start_;
  double idle_start_s_ = 0, idle_end_s_ = 0, active_start_s_ = 0, active_end_s_ = 0;
  int inferences_ = 0, timed_runs_ = 0;
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  int unreadable_ = 0;
  std::vector<double> t_s_, current_ua_, voltage_uv_;
};

}  // namespace farm
