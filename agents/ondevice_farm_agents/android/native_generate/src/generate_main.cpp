// The farm's native generation runner: an ONNX Runtime GenAI folder, generated from greedily and
// timed call by call, as agents/ondevice_farm_agents/host/generate_session.py times onnxruntime-genai's Python API
// (docs/generate.md): the cold load, then per generation `AppendTokens(prompt)` (prefill), the
// first `GenerateNextToken` and each later one; a second load once the generations are done.
//
//   farm_generate_runner --model DIR --prompt-ids 5,17,42 --decode 32 --out OUT
//       [--depths 0,512 --depth-ids ID,ID,...] [--reps 5] [--warmup 1] [--threads N]
//       [--kv-output present.0.key --kv-output present.0.value ...]
// (--prompt-ids and --depth-ids also take @FILE, a file holding the list)
//
// OUT/result.json holds the figures (the keys generate_session.py prints), the tokens and the
// first step's logits of the first generation at depth 0; OUT/error.json one line on failure.
// Each --kv-output names one cache tensor (K and V per layer, as genai_config.json names them): after
// the deepest depth's last generation the runner reads them back and sizes them (`kv_cache`, measured);
// where the runtime does not return one, `kv_cache` is null and `kv_cache_error` says why.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "json.h"
#include "memory.h"
#include "oga.h"

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start, Clock::time_point end) {
  return std::chrono::duration<double, std::milli>(end - start).count();
}

void check(OgaResult* result, const char* what) {
  if (result == nullptr) return;
  std::string message = std::string(what) + ": " + OgaResultGetError(result);
  OgaDestroyResult(result);
  throw std::runtime_error(message);
}

// `5,17,42`, or `@FILE` holding that list: a long prompt or depth filler would not fit the command
// line a device's shell takes (adbd caps it), so the Android agent writes them to files
std::vector<int32_t> parse_ids(const std::string& value) {
  std::string text = value;
  if (!text.empty() && text[0] == '@') {
    std::ifstream file(text.substr(1));
    if (!file) throw std::runtime_error("cannot read the token ids in " + text.substr(1));
    std::stringstream content;
    content << file.rdbuf();
    text = content.str();
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  }
  std::vector<int32_t> ids;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    ids.push_back(static_cast<int32_t>(std::stol(text.substr(start, end - start))));
    start = end + 1;
  }
  return ids;
}

struct Args {
  std::string model, out;
  std::vector<int32_t> prompt, depth_ids;
  std::vector<int32_t> depths{0};
  std::vector<std::string> kv_outputs;
  int decode = 0, reps = 5, warmup = 1, threads = 0;
};

Args parse_args(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    std::string key = argv[i];
    if (i + 1 >= argc) throw std::runtime_error(key + " needs a value");
    std::string value = argv[++i];
    if (key == "--model") args.model = value;
    else if (key == "--out") args.out = value;
    else if (key == "--prompt-ids") args.prompt = parse_ids(value);
    else if (key == "--depth-ids") args.depth_ids = parse_ids(value);
    else if (key == "--depths") args.depths = parse_ids(value);
    else if (key == "--decode") args.decode = std::stoi(value);
    else if (key == "--reps") args.reps = std::stoi(value);
    else if (key == "--warmup") args.warmup = std::stoi(value);
    else if (key == "--threads") args.threads = std::stoi(value);
    else if (key == "--kv-output") args.kv_outputs.push_back(value);
    else throw std::runtime_error("unknown option " + key);
  }
  if (args.model.empty() || args.out.empty() || args.prompt.empty() || args.decode < 2)
    throw std::runtime_error("--model, --out, --prompt-ids and --decode (at least 2) are required");
  for (int32_t depth : args.depths)
    if (depth < 0 || static_cast<size_t>(depth) > args.depth_ids.size())
      throw std::runtime_error("--depth-ids holds fewer ids than a depth asks for");
  return args;
}

OgaModel* load(const Args& args) {
  OgaConfig* config = nullptr;
  check(OgaCreateConfig(args.model.c_str(), &config), "reading the model folder");
  if (args.threads > 0) {
    std::string overlay = "{\"model\": {\"decoder\": {\"session_options\": {\"intra_op_num_threads\": " +
                          std::to_string(args.threads) + "}}}}";
    check(OgaConfigOverlay(config, overlay.c_str()), "setting the threads");
  }
  OgaModel* model = nullptr;
  OgaResult* result = OgaCreateModelFromConfig(config, &model);
  OgaDestroyConfig(config);
  check(result, "loading the model");
  return model;
}

struct Generation {
  farm::JsonObject timings;
  double ttft_ms = 0;  // prefill + the first token
  std::vector<int64_t> tokens;
  std::vector<double> logits;
  bool has_kv = false;  // kv_cache (or kv_error) read at the generation's end
  farm::JsonObject kv_cache;
  std::string kv_error;
};

struct TensorDeleter {
  void operator()(OgaTensor* tensor) const { OgaDestroyTensor(tensor); }
};
using Tensor = std::unique_ptr<OgaTensor, TensorDeleter>;

const char* element_name(OgaElementType type, int64_t* bytes) {
  switch (type) {
    case OgaElementType_float32: *bytes = 4; return "float32";
    case OgaElementType_float16: *bytes = 2; return "float16";
    case OgaElementType_bfloat16: *bytes = 2; return "bfloat16";
    default: throw std::runtime_error("a cache tensor of element type " + std::to_string(type));
  }
}

// The cache as the runtime holds it at the end of a generation: each named tensor's shape and element
// size, summed (the figure host/generate_session.py reads through the Python API's get_output).
farm::JsonObject kv_cache(OgaGenerator* generator, const std::vector<std::string>& names) {
  int64_t total = 0, element = 0;
  std::vector<int64_t> first_shape;
  const char* dtype = "";
  for (const std::string& name : names) {
    OgaTensor* raw = nullptr;
    check(OgaGenerator_GetOutput(generator, name.c_str(), &raw), ("reading the cache tensor " + name).c_str());
    Tensor tensor(raw);
    size_t rank = 0;
    OgaElementType type = OgaElementType_undefined;
    check(OgaTensorGetShapeRank(tensor.get(), &rank), "reading a cache tensor's rank");
    std::vector<int64_t> shape(rank);
    check(OgaTensorGetShape(tensor.get(), shape.data(), rank), "reading a cache tensor's shape");
    check(OgaTensorGetType(tensor.get(), &type), "reading a cache tensor's type");
    dtype = element_name(type, &element);
    int64_t elements = 1;
    for (int64_t d : shape) elements *= d;
    total += elements * element;
    if (first_shape.empty()) first_shape = shape;
  }
  farm::JsonObject kv;
  // [batch, kv heads, sequence, head size]: the sequence axis is the context the cache holds
  kv.add("bytes", total)
      .add("context_tokens", first_shape.size() == 4 ? first_shape[2] : int64_t{0})
      .add("source", "measured")
      .add("shape", first_shape)
      .add("layers", static_cast<int64_t>(names.size() / 2))
      .add("dtype", dtype);
  return kv;
}

// The last position's logits of the output "logits" ([batch, positions, vocabulary], float32).
std::vector<double> last_logits(OgaGenerator* generator) {
  OgaTensor* tensor = nullptr;
  check(OgaGenerator_GetOutput(generator, "logits", &tensor), "reading the logits");
  size_t rank = 0;
  OgaElementType type = OgaElementType_undefined;
  void* data = nullptr;
  check(OgaTensorGetShapeRank(tensor, &rank), "reading the logits' rank");
  std::vector<int64_t> shape(rank);
  check(OgaTensorGetShape(tensor, shape.data(), rank), "reading the logits' shape");
  check(OgaTensorGetType(tensor, &type), "reading the logits' type");
  check(OgaTensorGetData(tensor, &data), "reading the logits' data");
  if (type != OgaElementType_float32 || rank == 0) throw std::runtime_error("the logits are not float32");
  int64_t total = 1;
  for (int64_t d : shape) total *= d;
  int64_t vocabulary = shape.back();
  const float* values = static_cast<const float*>(data) + (total - vocabulary);
  std::vector<double> logits(values, values + vocabulary);
  OgaDestroyTensor(tensor);
  return logits;
}

Generation generate(const OgaModel* model, const Args& args, int32_t depth, bool outputs, bool read_kv = false) {
  OgaGeneratorParams* params = nullptr;
  check(OgaCreateGeneratorParams(model, &params), "creating the generator's parameters");
  double length = depth + static_cast<double>(args.prompt.size()) + args.decode;
  // greedy; min_length = max_length: no end-of-sequence token ends a generation early
  check(OgaGeneratorParamsSetSearchBool(params, "do_sample", false), "do_sample");
  check(OgaGeneratorParamsSetSearchNumber(params, "max_length", length), "max_length");
  check(OgaGeneratorParamsSetSearchNumber(params, "min_length", length), "min_length");
  OgaGenerator* generator = nullptr;
  OgaResult* created = OgaCreateGenerator(model, params, &generator);
  OgaDestroyGeneratorParams(params);
  check(created, "creating the generator");
  Generation generation;
  double depth_ms = 0;
  if (depth > 0) {
    auto start = Clock::now();
    check(OgaGenerator_AppendTokens(generator, args.depth_ids.data(), depth), "filling the cache");
    depth_ms = ms_since(start, Clock::now());
  }
  auto start = Clock::now();
  check(OgaGenerator_AppendTokens(generator, args.prompt.data(), args.prompt.size()), "the prompt");
  double prefill_ms = ms_since(start, Clock::now());
  if (outputs) generation.logits = last_logits(generator);
  auto first_start = Clock::now();
  check(OgaGenerator_GenerateNextToken(generator), "the first token");
  auto first_end = Clock::now();
  auto last_end = first_end;
  std::vector<double> token_ms;
  for (int i = 1; i < args.decode; ++i) {
    auto token_start = Clock::now();
    check(OgaGenerator_GenerateNextToken(generator), "a token");
    last_end = Clock::now();
    token_ms.push_back(ms_since(token_start, last_end));
  }
  size_t count = OgaGenerator_GetSequenceCount(generator, 0);
  const int32_t* sequence = OgaGenerator_GetSequenceData(generator, 0);
  for (size_t i = count - static_cast<size_t>(args.decode); i < count; ++i) generation.tokens.push_back(sequence[i]);
  if (read_kv && !args.kv_outputs.empty()) {  // after the timed calls: reading copies the tensors
    generation.has_kv = true;
    try {
      generation.kv_cache = kv_cache(generator, args.kv_outputs);
    } catch (const std::exception& error) {
      generation.kv_error = error.what();  // a runtime that keeps its cache to itself: said, not guessed
    }
  }
  OgaDestroyGenerator(generator);
  generation.ttft_ms = prefill_ms + ms_since(first_start, first_end);
  generation.timings.add("depth", static_cast<int64_t>(depth))
      .add("depth_prefill_ms", depth_ms)
      .add("prefill_ms", prefill_ms)
      .add("first_token_ms", ms_since(first_start, first_end))
      .add("token_ms", token_ms)
      .add("decode_span_ms", ms_since(first_end, last_end));
  return generation;
}

farm::JsonObject run(const Args& args) {
  int64_t rss_before = farm::status_bytes("VmRSS");
  auto start = Clock::now();
  OgaModel* model = load(args);
  double load_ms = ms_since(start, Clock::now());
  // the first generation is never timed: its tokens and logits are the outputs
  Generation first = generate(model, args, 0, true);
  for (int i = 1; i < args.warmup; ++i) generate(model, args, 0, false);
  std::vector<farm::JsonObject> reps;
  int32_t deepest = 0;
  for (int32_t depth : args.depths) deepest = depth > deepest ? depth : deepest;
  Generation last_deepest;  // the cache is read once, at the end of the longest context
  for (int32_t depth : args.depths)
    for (int rep = 0; rep < args.reps; ++rep) {
      bool read_kv = depth == deepest && rep == args.reps - 1 && !last_deepest.has_kv;
      Generation generation = generate(model, args, depth, false, read_kv);
      reps.push_back(generation.timings);
      if (read_kv) last_deepest = generation;
    }
  int64_t peak = farm::status_bytes("VmHWM");  // before a second model is loaded
  OgaDestroyModel(model);
  start = Clock::now();
  OgaModel* warm = load(args);
  double warm_load_ms = ms_since(start, Clock::now());
  OgaDestroyModel(warm);
  farm::JsonObject result;
  result.add("runtime", "farm generation runner (onnxruntime-genai C API)")
      .add("load_ms", load_ms)
      .add("warm_load_ms", warm_load_ms)
      .add("first_ttft_ms", first.ttft_ms)
      .add("reps", reps);
  if (last_deepest.has_kv && last_deepest.kv_error.empty()) result.add("kv_cache", last_deepest.kv_cache);
  else result.add_null("kv_cache");
  if (!last_deepest.kv_error.empty()) result.add("kv_cache_error", last_deepest.kv_error);
  result.add("tokens", first.tokens).add("first_step_logits", first.logits);
  if (rss_before >= 0) result.add("rss_before_bytes", rss_before);
  if (peak >= 0) result.add("rss_peak_bytes", peak);
  return result;
}

}  // namespace

int main(int argc, char** argv) {
  std::string out;
  try {
    Args args = parse_args(argc, argv);
    out = args.out;
    farm::write_file_atomically(out + "/result.json", run(args).str());
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "%s\n", error.what());
    if (!out.empty()) {
      farm::JsonObject json;
      json.add("error", error.what());
      farm::write_file_atomically(out + "/error.json", json.str());
    }
    return 1;
  }
}
