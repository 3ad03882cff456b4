#include "ort_run.h"

#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "affinity.h"
#include "energy.h"
#include "json.h"
#include "memory.h"
#include "npy.h"
#include "providers.h"
#include "telemetry.h"

namespace farm {
namespace {

//: the oldest API this runner calls into (GetBuildInfoString is API 15)
constexpr int kMinApi = 15;

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Owners that give ORT's objects back through the API they came from.
struct Released {
  const OrtApi* api;
  void operator()(OrtEnv* p) const { api->ReleaseEnv(p); }
  void operator()(OrtSession* p) const { api->ReleaseSession(p); }
  void operator()(OrtSessionOptions* p) const { api->ReleaseSessionOptions(p); }
  void operator()(OrtMemoryInfo* p) const { api->ReleaseMemoryInfo(p); }
  void operator()(OrtValue* p) const { api->ReleaseValue(p); }
  void operator()(OrtTensorTypeAndShapeInfo* p) const { api->ReleaseTensorTypeAndShapeInfo(p); }
};
template <typename T>
using Owned = std::unique_ptr<T, Released>;

struct Values {
  const OrtApi* api;
  std::vector<OrtValue*> items;
  Values(const OrtApi* a, size_t n) : api(a), items(n, nullptr) {}
  ~Values() { clear(); }
  void clear() {
    for (auto*& v : items) {
      if (v) api->ReleaseValue(v);
      v = nullptr;
    }
  }
};

std::vector<std::string> names(const Ort& ort, OrtSession* session, bool inputs) {
  OrtAllocator* allocator = nullptr;
  ort.check(ort.api->GetAllocatorWithDefaultOptions(&allocator), "getting the allocator");
  size_t count = 0;
  ort.check(inputs ? ort.api->SessionGetInputCount(session, &count) : ort.api->SessionGetOutputCount(session, &count),
            "counting graph inputs/outputs");
  std::vector<std::string> out;
  for (size_t i = 0; i < count; ++i) {
    char* name = nullptr;
    ort.check(inputs ? ort.api->SessionGetInputName(session, i, allocator, &name)
                     : ort.api->SessionGetOutputName(session, i, allocator, &name),
              "reading graph names");
    out.emplace_back(name);
    ort.check(ort.api->AllocatorFree(allocator, name), "freeing a name");
  }
  return out;
}

std::vector<const char*> c_strings(const std::vector<std::string>& items) {
  std::vector<const char*> out;
  for (const auto& s : items) out.push_back(s.c_str());
  return out;
}

struct Session {
  Owned<OrtSessionOptions> options;
  Owned<OrtSession> session;
};

Session open_session(const Ort& ort, OrtEnv* env, const Options& o, const std::string& profile_prefix) {
  OrtSessionOptions* raw = nullptr;
  ort.check(ort.api->CreateSessionOptions(&raw), "creating session options");
  Session s{Owned<OrtSessionOptions>(raw, Released{ort.api}), Owned<OrtSession>(nullptr, Released{ort.api})};
  ort.check(ort.api->SetSessionGraphOptimizationLevel(raw, ORT_ENABLE_ALL), "setting the optimisation level");
  if (o.threads > 0) ort.check(ort.api->SetIntraOpNumThreads(raw, o.threads), "setting threads");
  if (o.allow_spinning >= 0) {
    ort.check(ort.api->AddSessionConfigEntry(raw, "session.intra_op.allow_spinning", o.allow_spinning ? "1" : "0"),
              "setting session.intra_op.allow_spinning");
  }
  if (!profile_prefix.empty()) ort.check(ort.api->EnableProfiling(raw, profile_prefix.c_str()), "enabling profiling");
  append_provider(ort, env, raw, o);
  OrtSession* session = nullptr;
  ort.check(ort.api->CreateSession(env, o.model.c_str(), raw, &session), "loading the model");
  s.session.reset(session);
  return s;
}

struct Feeds {
  std::vector<Tensor> tensors;
  std::vector<std::string> names;
  Values values;
  explicit Feeds(const OrtApi* api) : values(api, 0) {}
};

void load_feeds(const Ort& ort, const Options& o, const std::vector<std::string>& graph_inputs, Feeds& feeds) {
  for (const auto& name : graph_inputs) {
    bool given = false;
    for (const auto& kv : o.inputs) given = given || kv.first == name;
    if (!given) throw std::runtime_error("no --input for graph input '" + name + "'");
  }
  OrtMemoryInfo* raw = nullptr;
  ort.check(ort.api->CreateCpuMemoryInfo(OrtArenaAllocator, OrtMemTypeDefault, &raw), "creating memory info");
  Owned<OrtMemoryInfo> memory(raw, Released{ort.api});
  feeds.tensors.reserve(o.inputs.size());
  for (const auto& kv : o.inputs) {
    feeds.tensors.push_back(read_npy(kv.second));
    feeds.names.push_back(kv.first);
  }
  feeds.values.items.assign(feeds.tensors.size(), nullptr);
  for (size_t i = 0; i < feeds.tensors.size(); ++i) {
    Tensor& t = feeds.tensors[i];
    static char empty = 0;
    void* data = t.data.empty() ? &empty : t.data.data();
    ort.check(ort.api->CreateTensorWithDataAsOrtValue(raw, data, t.data.size(), t.shape.data(), t.shape.size(),
                                                      t.type, &feeds.values.items[i]),
              "wrapping input '" + feeds.names[i] + "'");
  }
}

void run_once(const Ort& ort, OrtSession* session, const Feeds& feeds, const std::vector<const char*>& in_names,
              const std::vector<const char*>& out_names, Values& outputs) {
  outputs.clear();
  ort.check(ort.api->Run(session, nullptr, in_names.data(), feeds.values.items.data(), in_names.size(),
                         out_names.data(), out_names.size(), outputs.items.data()),
            "running the model");
}

// The first inference's outputs as outputs/<i>.npy; what has no .npy form is listed as skipped.
std::vector<JsonObject> write_outputs(const Ort& ort, const Options& o, const std::vector<std::string>& out_names,
                                      const Values& outputs, std::vector<JsonObject>& skipped) {
  const std::string dir = o.out_dir + "/outputs";
  mkdir(dir.c_str(), 0755);
  std::vector<JsonObject> written;
  for (size_t i = 0; i < out_names.size(); ++i) {
    int is_tensor = 0;
    ort.check(ort.api->IsTensor(outputs.items[i], &is_tensor), "inspecting an output");
    if (!is_tensor) {
      skipped.push_back(JsonObject().add("name", out_names[i]).add("reason", "not a tensor (sequence or map)"));
      continue;
    }
    OrtTensorTypeAndShapeInfo* raw = nullptr;
    ort.check(ort.api->GetTensorTypeAndShape(outputs.items[i], &raw), "reading an output's shape");
    Owned<OrtTensorTypeAndShapeInfo> info(raw, Released{ort.api});
    ONNXTensorElementDataType type = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
    size_t rank = 0, count = 0;
    ort.check(ort.api->GetTensorElementType(raw, &type), "reading an output's type");
    ort.check(ort.api->GetDimensionsCount(raw, &rank), "reading an output's rank");
    ort.check(ort.api->GetTensorShapeElementCount(raw, &count), "reading an output's size");
    std::vector<int64_t> shape(rank);
    ort.check(ort.api->GetDimensions(raw, shape.data(), rank), "reading an output's shape");
    if (npy_descr(type).empty()) {
      skipped.push_back(JsonObject().add("name", out_names[i]).add("reason",
                                                                   "element type " + std::to_string(type) +
                                                                       " has no .npy form"));
      continue;
    }
    void* data = nullptr;
    ort.check(ort.api->GetTensorMutableData(outputs.items[i], &data), "reading an output");
    const std::string file = "outputs/" + std::to_string(i) + ".npy";
    write_npy(o.out_dir + "/" + file, type, shape, data, count * element_size(type));
    written.push_back(JsonObject().add("name", out_names[i]).add("file", file).add("dtype", npy_descr(type))
                          .add("shape", shape));
  }
  return written;
}

std::string build_type(const std::string& info) {
  const std::string key = "build type=";
  auto at = info.find(key);
  if (at == std::string::npos) return "";
  auto end = info.find_first_of(",\n", at);
  return info.substr(at + key.size(), end == std::string::npos ? std::string::npos : end - at - key.size());
}

std::vector<std::string> available_providers(const Ort& ort) {
  char** list = nullptr;
  int count = 0;
  ort.check(ort.api->GetAvailableProviders(&list, &count), "listing providers");
  std::vector<std::string> out(list, list + count);
  ort.check(ort.api->ReleaseAvailableProviders(list, count), "releasing the provider list");
  return out;
}

// Inferences back to back for o.sustained_s, cut into windows of o.window_s; each window keeps
// its latencies and the telemetry read at its end.
JsonObject run_sustained(const Ort& ort, OrtSession* session, const Feeds& feeds, const std::vector<const char*>& in_c,
                         const std::vector<const char*>& out_c, Values& scratch, const Options& o) {
  const Telemetry at_start = read_telemetry(o.devfreq_dir);
  std::vector<JsonObject> windows;
  const auto begin = Clock::now();
  const auto seconds = [&](Clock::time_point t) { return std::chrono::duration<double>(t - begin).count(); };
  auto window_start = begin;
  std::vector<double> samples;
  Telemetry last = at_start;
  for (;;) {
    const auto before = Clock::now();
    if (seconds(before) >= o.sustained_s) break;
    run_once(ort, session, feeds, in_c, out_c, scratch);
    const auto after = Clock::now();
    samples.push_back(std::chrono::duration<double, std::milli>(after - before).count());
    if (seconds(after) - seconds(window_start) >= o.window_s || seconds(after) >= o.sustained_s) {
      last = read_telemetry(o.devfreq_dir);
      windows.push_back(JsonObject().add("start_s", seconds(window_start)).add("end_s", seconds(after))
                            .add("samples_ms", samples).add("telemetry", telemetry_json(last)));
      samples.clear();
      window_start = after;
    }
  }
  return JsonObject().add("duration_s", o.sustained_s).add("window_s", o.window_s)
      .add("start", telemetry_json(at_start)).add("windows", windows).add("unavailable", telemetry_gaps(last));
}

}  // namespace

void Ort::check(OrtStatus* status, const std::string& what) const {
  if (status == nullptr) return;
  std::string message = what + ": " + api->GetErrorMessage(status);
  api->ReleaseStatus(status);
  throw std::runtime_error(message);
}

Ort init_ort() {
  const OrtApiBase* base = OrtGetApiBase();
  Ort ort;
  ort.version = base->GetVersionString();
  // ORT 1.N serves API versions 1..N: ask for min(headers, library), never more than it has.
  int library_api = std::atoi(ort.version.substr(ort.version.find('.') + 1).c_str());
  ort.api_version = library_api > 0 && library_api < ORT_API_VERSION ? library_api : ORT_API_VERSION;
  ort.api = base->GetApi(ort.api_version);
  if (ort.api == nullptr || ort.api_version < kMinApi) {
    throw std::runtime_error("onnxruntime " + ort.version + " does not offer API " + std::to_string(ort.api_version) +
                             " (this runner needs API " + std::to_string(kMinApi) + " or newer)");
  }
  ort.build_info = ort.api->GetBuildInfoString();
  return ort;
}

std::vector<int64_t> wide(const std::vector<int>& cpus) { return std::vector<int64_t>(cpus.begin(), cpus.end()); }

// What the runner applied, as it read it back: the main thread's mask and the union of every
// thread's (read while the timed session and its thread pool were alive).
JsonObject controls_json(const Options& o, const std::vector<int>& affinity, const std::vector<int>& threads_mask) {
  JsonObject c;
  if (o.threads > 0) {
    c.add("threads", o.threads);
  } else {
    c.add_null("threads");
  }
  c.add("threads_source", o.threads_from_cpus ? "one per pinned CPU" : o.threads > 0 ? "asked" : "runtime default");
  if (o.cpus.empty()) {
    c.add_null("cpus_requested");
  } else {
    c.add("cpus_requested", wide(o.cpus));
  }
  c.add("affinity", wide(affinity)).add("threads_affinity", wide(threads_mask)).add("online_cpus", online_cpus());
  if (o.allow_spinning >= 0) {
    c.add("allow_spinning", o.allow_spinning == 1);
  } else {
    c.add_null("allow_spinning");
  }
  return c;
}

void measure(const Ort& ort, const Options& o) {
  std::string stage = "setup";
  try {
    if (!o.cpus.empty()) {
      // before ONNX Runtime starts a thread: every thread it starts inherits the mask
      stage = "affinity";
      pin_process(o.cpus);
      stage = "setup";
    }
    OrtEnv* raw_env = nullptr;
    ort.check(ort.api->CreateEnv(ORT_LOGGING_LEVEL_ERROR, "farm", &raw_env), "creating the environment");
    Owned<OrtEnv> env(raw_env, Released{ort.api});
    const int64_t rss_before = status_bytes("VmRSS");

    stage = "load";
    auto start = Clock::now();
    Session timed = open_session(ort, env.get(), o, "");
    const double load_ms = ms_since(start);
    const auto input_names = names(ort, timed.session.get(), true);
    const auto output_names = names(ort, timed.session.get(), false);

    stage = "inputs";
    Feeds feeds(ort.api);
    load_feeds(ort, o, input_names, feeds);
    const auto in_c = c_strings(feeds.names);
    const auto out_c = c_strings(output_names);

    stage = "first_inference";
    Values first(ort.api, output_names.size());
    start = Clock::now();
    run_once(ort, timed.session.get(), feeds, in_c, out_c, first);
    const double first_ms = ms_since(start);

    stage = "warmup";
    Values scratch(ort.api, output_names.size());
    start = Clock::now();
    for (int i = 0; i < o.warmup; ++i) run_once(ort, timed.session.get(), feeds, in_c, out_c, scratch);
    const double warmup_ms = ms_since(start);

    EnergyRecorder energy(o);
    if (energy.enabled()) {
      stage = "energy_idle";
      energy.idle_window();
      energy.begin_active();
    }

    stage = "timed_runs";
    std::vector<double> samples;
    samples.reserve(static_cast<size_t>(o.runs));
    for (int i = 0; i < o.runs; ++i) {
      start = Clock::now();
      run_once(ort, timed.session.get(), feeds, in_c, out_c, scratch);
      samples.push_back(ms_since(start));
    }
    if (energy.enabled()) {
      // a fuel gauge needs more than a few milliseconds of load: untimed runs fill the window
      stage = "energy_active";
      int extra = 0;
      while (energy.active_elapsed_s() < o.energy_min_active_s) {
        run_once(ort, timed.session.get(), feeds, in_c, out_c, scratch);
        ++extra;
      }
      energy.end_active(o.runs + extra, o.runs);
    }
    const int64_t hwm = status_bytes("VmHWM");
    // read while the timed session's thread pool is alive
    const std::vector<int> affinity = current_affinity();
    const std::vector<int> threads_mask = process_threads_affinity();

    JsonObject sustained;
    if (o.sustained_s > 0) {
      stage = "sustained";
      sustained = run_sustained(ort, timed.session.get(), feeds, in_c, out_c, scratch, o);
    }

    stage = "outputs";
    std::vector<JsonObject> skipped;
    const auto written = write_outputs(ort, o, output_names, first, skipped);
    first.clear();
    scratch.clear();
    timed.session.reset();

    // a second session in the same process: what a warm start (page cache, allocator, any
    // compile cache of the provider) costs beside the first load
    stage = "warm_load";
    start = Clock::now();
    Session warm = open_session(ort, env.get(), o, "");
    const double warm_load_ms = ms_since(start);
    warm.session.reset();

    JsonObject profile;
    if (o.profile_runs > 0) {
      stage = "profile";
      Session profiled = open_session(ort, env.get(), o, o.out_dir + "/profile");
      Values out(ort.api, output_names.size());
      for (int i = 0; i < o.profile_runs; ++i) run_once(ort, profiled.session.get(), feeds, in_c, out_c, out);
      out.clear();
      OrtAllocator* allocator = nullptr;
      ort.check(ort.api->GetAllocatorWithDefaultOptions(&allocator), "getting the allocator");
      char* file = nullptr;
      ort.check(ort.api->SessionEndProfiling(profiled.session.get(), allocator, &file), "ending the profile");
      const std::string target = o.out_dir + "/profile.json";
      const bool moved = std::rename(file, target.c_str()) == 0;
      ort.check(ort.api->AllocatorFree(allocator, file), "freeing the profile name");
      if (!moved) throw std::runtime_error("cannot move the profile to " + target);
      profile.add("file", "profile.json").add("runs", o.profile_runs)
          .add("note", "every profiled run is in the file; the host leaves the first (cold) one out");
    }

    stage = "result";
    const int64_t peak = hwm >= 0 && rss_before >= 0 ? (hwm > rss_before ? hwm - rss_before : 0) : -1;
    JsonObject result;
    result.add("runner", "farm_native_runner").add("runner_version", FARM_RUNNER_VERSION)
        .add("runner_build_type", FARM_BUILD_TYPE).add("ort_version", ort.version)
        .add("ort_api_version", ort.api_version).add("ort_build_type", build_type(ort.build_info))
        .add("execution_provider", o.ep).add("available_providers", available_providers(ort))
        .add("clock", "std::chrono::steady_clock (CLOCK_MONOTONIC)")
        .add("load_ms", load_ms).add("warm_load_ms", warm_load_ms).add("first_inference_ms", first_ms)
        .add("warmup_runs", o.warmup)
        .add("warmup_total_ms", warmup_ms)
        .add("samples_ms", samples).add("outputs", written).add("outputs_skipped", skipped);
    if (peak >= 0) {
      result.add("peak_memory_bytes", peak);
    } else {
      result.add_null("peak_memory_bytes");
    }
    result.add("peak_memory_kind",
               "resident set high-water mark (VmHWM) minus resident set (VmRSS) just before the session "
               "was created, from /proc/self/status: load, first inference, warm-up and timed runs; "
               "the profiled pass is not included");
    result.add("controls", controls_json(o, affinity, threads_mask));
    if (o.profile_runs > 0) result.add("profile", profile);
    if (o.sustained_s > 0) result.add("sustained", sustained);
    if (energy.asked()) result.add("energy", energy.json());
    write_file_atomically(o.out_dir + "/result.json", result.str());
  } catch (const StageError&) {
    throw;
  } catch (const std::exception& e) {
    throw StageError(stage, e.what());
  }
}

}  // namespace farm
