// The part of onnxruntime-genai's C API the generation runner calls. The wheels ship
// libonnxruntime-genai.so without its header, so the declarations are written here from the
// project's own `src/ort_genai_c.h` (github.com/microsoft/onnxruntime-genai, checked against the
// symbols the 0.18.0 x86-64 and aarch64 wheels' libraries export). Every call that can fail
// returns an OgaResult* (nullptr: success) whose message OgaResultGetError gives.
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {

struct OgaResult;
struct OgaConfig;
struct OgaModel;
struct OgaGeneratorParams;
struct OgaGenerator;
struct OgaTensor;

// onnxruntime-genai's OgaElementType (ONNX's element type numbers); the logits are read as float32,
// the KV cache's tensors are only sized (float32, float16 or bfloat16)
enum OgaElementType {
  OgaElementType_undefined = 0,
  OgaElementType_float32 = 1,
  OgaElementType_float16 = 10,
  OgaElementType_bfloat16 = 16
};

const char* OgaResultGetError(const OgaResult* result);
void OgaDestroyResult(OgaResult* result);

OgaResult* OgaCreateConfig(const char* config_path, OgaConfig** out);
OgaResult* OgaConfigOverlay(OgaConfig* config, const char* json);
void OgaDestroyConfig(OgaConfig* config);
OgaResult* OgaCreateModelFromConfig(const OgaConfig* config, OgaModel** out);
void OgaDestroyModel(OgaModel* model);

OgaResult* OgaCreateGeneratorParams(const OgaModel* model, OgaGeneratorParams** out);
void OgaDestroyGeneratorParams(OgaGeneratorParams* params);
OgaResult* OgaGeneratorParamsSetSearchNumber(OgaGeneratorParams* params, const char* name, double value);
OgaResult* OgaGeneratorParamsSetSearchBool(OgaGeneratorParams* params, const char* name, bool value);

OgaResult* OgaCreateGenerator(const OgaModel* model, const OgaGeneratorParams* params, OgaGenerator** out);
void OgaDestroyGenerator(OgaGenerator* generator);
OgaResult* OgaGenerator_AppendTokens(OgaGenerator* generator, const int32_t* input_ids, size_t input_ids_count);
OgaResult* OgaGenerator_GenerateNextToken(OgaGenerator* generator);
size_t OgaGenerator_GetSequenceCount(const OgaGenerator* generator, size_t index);
const int32_t* OgaGenerator_GetSequenceData(const OgaGenerator* generator, size_t index);
OgaResult* OgaGenerator_GetOutput(const OgaGenerator* generator, const char* name, OgaTensor** out);

void OgaDestroyTensor(OgaTensor* tensor);
OgaResult* OgaTensorGetType(OgaTensor* tensor, OgaElementType* out);
OgaResult* OgaTensorGetShapeRank(OgaTensor* tensor, size_t* out);
OgaResult* OgaTensorGetShape(OgaTensor* tensor, int64_t* shape_dims, size_t shape_dims_count);
OgaResult* OgaTensorGetData(OgaTensor* tensor, void** out);

}  // extern "C"
