#include "energy.h"
#include "sysfs.h"

#include <fstream>

namespace farm {
namespace {

std::vector<double> rounded(const std::vector<double>& values, double scale) {
  std::vector<double> out;
  out.reserve(values.size());
  for (double v : values) out.push_back(static_cast<double>(static_cast<int64_t>(v * scale)) / scale);
  return out;
}

}  // namespace

EnergyRecorder::EnergyRecorder(const Options& o) : o_(o), origin_(Clock::now()) {
  asked_ = !o.battery_dir.empty();
  if (!asked_) return;
  double current = 0, voltage = 0;
  if (!read_number(o.battery_dir + "/current_now", current) || !read_number(o.battery_dir + "/voltage_now", voltage)) {
    unavailable_ = "cannot read " + o.battery_dir + "/current_now and voltage_now";
    return;
  }
  status_ = read_word(o.battery_dir + "/status");
  enabled_ = true;
}

EnergyRecorder::~EnergyRecorder() { stop(); }

double EnergyRecorder::since_origin(Clock::time_point t) const {
  return std::chrono::duration<double>(t - origin_).count();
}

void EnergyRecorder::sample_loop() {
  const auto period = std::chrono::duration<double, std::milli>(o_.energy_sample_ms);
  auto next = Clock::now();
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    lock.unlock();
    double current = 0, voltage = 0;
    const auto at = Clock::now();
    const bool ok = read_number(o_.battery_dir + "/current_now", current) &&
                    read_number(o_.battery_dir + "/voltage_now", voltage);
    lock.lock();
    if (ok) {
      t_s_.push_back(since_origin(at));
      current_ua_.push_back(current);
      voltage_uv_.push_back(voltage);
    } else {
      ++unreadable_;
    }
    next += std::chrono::duration_cast<Clock::duration>(period);
    wake_.wait_until(lock, next, [this] { return stopping_; });
  }
}

void EnergyRecorder::idle_window() {
  thread_ = std::thread([this] { sample_loop(); });
  // the settle time lets the warm-up's load (and the fuel gauge's averaging of it) fade first
  std::this_thread::sleep_for(std::chrono::duration<double>(o_.energy_settle_s));
  idle_start_s_ = since_origin(Clock::now());
  std::this_thread::sleep_for(std::chrono::duration<double>(o_.energy_idle_s));
  idle_end_s_ = since_origin(Clock::now());
}

void EnergyRecorder::begin_active() {
  active_start_ = Clock::now();
  active_start_s_ = since_origin(active_start_);
}

double EnergyRecorder::active_elapsed_s() const {
  return std::chrono::duration<double>(Clock::now() - active_start_).count();
}

void EnergyRecorder::end_active(int inferences, int timed_runs) {
  active_end_s_ = since_origin(Clock::now());
  inferences_ = inferences;
  timed_runs_ = timed_runs;
  stop();
}

void EnergyRecorder::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

JsonObject EnergyRecorder::json() {
  stop();
  JsonObject out;
  if (!enabled_) return out.add("unavailable", unavailable_);
  out.add("battery_dir", o_.battery_dir).add("status", status_).add("sample_period_ms", o_.energy_sample_ms)
      .add("settle_s", o_.energy_settle_s)
      .add("idle", JsonObject().add("start_s", idle_start_s_).add("end_s", idle_end_s_))
      .add("active", JsonObject().add("start_s", active_start_s_).add("end_s", active_end_s_)
                         .add("inferences", inferences_).add("timed_runs", timed_runs_))
      .add("unreadable_samples", unreadable_)
      .add("t_s", rounded(t_s_, 1e6)).add("current_ua", current_ua_).add("voltage_uv", voltage_uv_);
  return out;
}

}  // namespace farm
