// NumPy's .npy format (v1-v3, little-endian, C order): what the host writes inputs in and
// reads outputs from with np.load(allow_pickle=False), so nothing from a device is executed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "onnxruntime_c_api.h"

namespace farm {

struct Tensor {
  ONNXTensorElementDataType type = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
  std::vector<int64_t> shape;
  std::vector<char> data;
};

// The npy descr ("<f4", "|b1", ...) of an element type; "" where .npy has none (strings, bf16...).
std::string npy_descr(ONNXTensorElementDataType type);
size_t element_size(ONNXTensorElementDataType type);

// Throw std::runtime_error naming the file on anything they cannot do.
Tensor read_npy(const std::string& path);
void write_npy(const std::string& path, ONNXTensorElementDataType type, const std::vector<int64_t>& shape,
               const void* data, size_t bytes);

}  // namespace farm
