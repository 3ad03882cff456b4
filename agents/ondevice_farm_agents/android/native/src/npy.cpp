#include "npy.h"

#include <cstring>
#include <fstream>
#include <stdexcept>

namespace farm {
namespace {

struct Kind {
  ONNXTensorElementDataType type;
  const char* descr;
  size_t size;
};

const Kind kKinds[] = {
    {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, "<f4", 4},   {ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE, "<f8", 8},
    {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16, "<f2", 2}, {ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8, "|i1", 1},
    {ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8, "|u1", 1},   {ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16, "<i2", 2},
    {ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16, "<u2", 2},  {ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32, "<i4", 4},
    {ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT32, "<u4", 4},  {ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64, "<i8", 8},
    {ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT64, "<u8", 8},  {ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL, "|b1", 1},
};

bool little_endian_host() {
  const uint16_t probe = 1;
  unsigned char first = 0;
  std::memcpy(&first, &probe, 1);
  return first == 1;
}

// The value after `'key':` in the header dict, up to the next top-level comma or brace.
std::string dict_value(const std::string& header, const std::string& key, const std::string& path) {
  auto at = header.find("'" + key + "'");
  if (at == std::string::npos) throw std::runtime_error(path + ": .npy header has no '" + key + "'");
  at = header.find(':', at);
  if (at == std::string::npos) throw std::runtime_error(path + ": bad .npy header");
  ++at;
  while (at < header.size() && header[at] == ' ') ++at;
  if (at < header.size() && header[at] == '(') {
    auto end = header.find(')', at);
    if (end == std::string::npos) throw std::runtime_error(path + ": bad .npy shape");
    return header.substr(at, end - at + 1);
  }
  auto end = header.find_first_of(",}", at);
  return header.substr(at, end - at);
}

std::vector<int64_t> parse_shape(const std::string& text, const std::string& path) {
  std::vector<int64_t> shape;
  std::string digits;
  for (char c : text.substr(1)) {
    if (c >= '0' && c <= '9') {
      digits += c;
    } else if (c == ',' || c == ')') {
      if (!digits.empty()) shape.push_back(std::stoll(digits));
      digits.clear();
    } else if (c != ' ') {
      throw std::runtime_error(path + ": bad .npy shape " + text);
    }
  }
  return shape;
}

}  // namespace

std::string npy_descr(ONNXTensorElementDataType type) {
  for (const auto& k : kKinds) {
    if (k.type == type) return k.descr;
  }
  return "";
}

size_t element_size(ONNXTensorElementDataType type) {
  for (const auto& k : kKinds) {
    if (k.type == type) return k.size;
  }
  return 0;
}

Tensor read_npy(const std::string& path) {
  if (!little_endian_host()) throw std::runtime_error("this runner supports little-endian hosts only");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open");
  char magic[8];
  if (!in.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0) {
    throw std::runtime_error(path + ": not a .npy file");
  }
  uint32_t header_len = 0;
  if (magic[6] == 1) {
    unsigned char b[2];
    in.read(reinterpret_cast<char*>(b), 2);
    header_len = b[0] | (b[1] << 8);
  } else {
    unsigned char b[4];
    in.read(reinterpret_cast<char*>(b), 4);
    header_len = b[0] | (b[1] << 8) | (b[2] << 16) | (static_cast<uint32_t>(b[3]) << 24);
  }
  if (!in || header_len > (1u << 20)) throw std::runtime_error(path + ": bad .npy header length");
  std::string header(header_len, '\0');
  if (!in.read(&header[0], header_len)) throw std::runtime_error(path + ": truncated .npy header");

  std::string descr = dict_value(header, "descr", path);
  if (descr.size() >= 2 && descr.front() == '\'') descr = descr.substr(1, descr.size() - 2);
  if (dict_value(header, "fortran_order", path).find("False") == std::string::npos) {
    throw std::runtime_error(path + ": Fortran-order arrays are not supported");
  }
  Tensor t;
  for (const auto& k : kKinds) {
    if (descr == k.descr) t.type = k.type;
  }
  if (t.type == ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED) {
    throw std::runtime_error(path + ": dtype " + descr + " is not supported (little-endian numbers and bool)");
  }
  t.shape = parse_shape(dict_value(header, "shape", path), path);
  size_t count = 1;
  for (auto d : t.shape) count *= static_cast<size_t>(d);
  t.data.resize(count * element_size(t.type));
  if (!t.data.empty() && !in.read(t.data.data(), static_cast<std::streamsize>(t.data.size()))) {
    throw std::runtime_error(path + ": truncated .npy data");
  }
  return t;
}

void write_npy(const std::string& path, ONNXTensorElementDataType type, const std::vector<int64_t>& shape,
               const void* data, size_t bytes) {
  std::string descr = npy_descr(type);
  if (descr.empty()) throw std::runtime_error("element type " + std::to_string(type) + " has no .npy form");
  std::string dims;
  for (auto d : shape) dims += std::to_string(d) + ", ";
  if (shape.size() > 1) dims.resize(dims.size() - 2);
  if (shape.size() == 1) dims.resize(dims.size() - 1);
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + dims + "), }";
  // The whole preamble (10 bytes + header + newline) is padded to a multiple of 64, as NumPy does.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw std::runtime_error(path + ": cannot create");
  const unsigned char preamble[8] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  out.write(reinterpret_cast<const char*>(preamble), 8);
  const unsigned char len[2] = {static_cast<unsigned char>(header.size() & 0xFF),
                                static_cast<unsigned char>(header.size() >> 8)};
  out.write(reinterpret_cast<const char*>(len), 2);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  if (!out) throw std::runtime_error(path + ": write failed");
}

}  // namespace farm
