#include "providers.h"

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#ifdef FARM_HAVE_NNAPI
#include "nnapi_provider_factory.h"
#endif

namespace farm {
namespace {

// RegisterExecutionProviderLibrary, GetEpDevices and SessionOptionsAppendExecutionProvider_V2.
constexpr int kPluginEpApi = 22;
//: the EP name Qualcomm's plugin library registers its devices under
const char* const kQnnEpName = "QNNExecutionProvider";

struct KeyValues {
  std::vector<const char*> keys, values;
  explicit KeyValues(const Options& o) {
    for (const auto& kv : o.ep_options) {
      keys.push_back(kv.first.c_str());
      values.push_back(kv.second.c_str());
    }
  }
};

#ifdef FARM_HAVE_NNAPI
uint32_t nnapi_flags(const Options& o) {
  uint32_t flags = 0;
  for (const auto& kv : o.ep_options) {
    uint32_t bit = 0;
    if (kv.first == "NNAPI_FLAG_USE_FP16") bit = NNAPI_FLAG_USE_FP16;
    else if (kv.first == "NNAPI_FLAG_USE_NCHW") bit = NNAPI_FLAG_USE_NCHW;
    else if (kv.first == "NNAPI_FLAG_CPU_DISABLED") bit = NNAPI_FLAG_CPU_DISABLED;
    else if (kv.first == "NNAPI_FLAG_CPU_ONLY") bit = NNAPI_FLAG_CPU_ONLY;
    else throw std::runtime_error("unknown NNAPI option " + kv.first + " (NNAPI_FLAG_USE_FP16, _USE_NCHW, "
                                  "_CPU_DISABLED, _CPU_ONLY)");
    if (kv.second != "0") flags |= bit;
  }
  return flags;
}
#endif

void append_plugin(const Ort& ort, OrtEnv* env, OrtSessionOptions* options, const Options& o,
                   const char* ep_name) {
  if (ort.api_version < kPluginEpApi) {
    throw std::runtime_error("plugin EP libraries need ONNX Runtime API " + std::to_string(kPluginEpApi) +
                             ", this library has " + std::to_string(ort.api_version));
  }
  ort.check(ort.api->RegisterExecutionProviderLibrary(env, ep_name, o.ep_library.c_str()),
            "registering " + o.ep_library);
  const OrtEpDevice* const* devices = nullptr;
  size_t count = 0;
  ort.check(ort.api->GetEpDevices(env, &devices, &count), "listing EP devices");
  std::vector<const OrtEpDevice*> chosen;
  for (size_t i = 0; i < count; ++i) {
    if (std::string(ort.api->EpDevice_EpName(devices[i])) == ep_name) chosen.push_back(devices[i]);
  }
  if (chosen.empty()) {
    throw std::runtime_error(o.ep_library + " registered no device for " + ep_name);
  }
  KeyValues kv(o);
  ort.check(ort.api->SessionOptionsAppendExecutionProvider_V2(options, env, chosen.data(), chosen.size(),
                                                               kv.keys.data(), kv.values.data(),
                                                               kv.keys.size()),
            std::string("appending ") + ep_name);
}

}  // namespace

void append_provider(const Ort& ort, OrtEnv* env, OrtSessionOptions* options, const Options& o) {
  if (o.disable_cpu_fallback) {
    ort.check(ort.api->AddSessionConfigEntry(options, "session.disable_cpu_ep_fallback", "1"),
              "disabling CPU fallback");
  }
  if (o.ep == "cpu") {
    if (!o.ep_options.empty()) throw std::runtime_error("the CPU provider takes no provider options");
    return;
  }
  if (o.ep == "nnapi") {
#ifdef FARM_HAVE_NNAPI
    ort.check(OrtSessionOptionsAppendExecutionProvider_Nnapi(options, nnapi_flags(o)), "appending NNAPI");
    return;
#else
    throw std::runtime_error("NNAPI is compiled in only in the Android build of this runner");
#endif
  }
  if (o.ep == "qnn" && !o.ep_library.empty()) {
    append_plugin(ort, env, options, o, kQnnEpName);
    return;
  }
  // XNNPACK and QNN (built into the library) through the generic call; ORT says plainly when
  // the library was built without the provider.
  KeyValues kv(o);
  const char* name = o.ep == "xnnpack" ? "XNNPACK" : "QNN";
  ort.check(ort.api->SessionOptionsAppendExecutionProvider(options, name, kv.keys.data(), kv.values.data(),
                                                           kv.keys.size()),
            std::string("appending ") + name);
}

}  // namespace farm
