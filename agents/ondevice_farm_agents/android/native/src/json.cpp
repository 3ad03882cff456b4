#include "json.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <stdexcept>

namespace farm {

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

std::string json_number(double value) {
  if (!std::isfinite(value)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", value);
  return buf;
}

JsonObject& JsonObject::raw(const std::string& key, const std::string& json) {
  if (!body_.empty()) body_ += ", ";
  body_ += json_string(key) + ": " + json;
  return *this;
}

JsonObject& JsonObject::add(const std::string& key, const std::string& value) {
  return raw(key, json_string(value));
}
JsonObject& JsonObject::add(const std::string& key, const char* value) { return raw(key, json_string(value)); }
JsonObject& JsonObject::add(const std::string& key, double value) { return raw(key, json_number(value)); }
JsonObject& JsonObject::add(const std::string& key, int64_t value) { return raw(key, std::to_string(value)); }
JsonObject& JsonObject::add(const std::string& key, int value) { return raw(key, std::to_string(value)); }
JsonObject& JsonObject::add(const std::string& key, bool value) { return raw(key, value ? "true" : "false"); }
JsonObject& JsonObject::add_null(const std::string& key) { return raw(key, "null"); }
JsonObject& JsonObject::add(const std::string& key, const JsonObject& value) { return raw(key, value.str()); }

JsonObject& JsonObject::add(const std::string& key, const std::vector<double>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + json_number(values[i]);
  return raw(key, out + "]");
}

JsonObject& JsonObject::add(const std::string& key, const std::vector<int64_t>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + std::to_string(values[i]);
  return raw(key, out + "]");
}

JsonObject& JsonObject::add(const std::string& key, const std::vector<std::string>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + json_string(values[i]);
  return raw(key, out + "]");
}

JsonObject& JsonObject::add(const std::string& key, const std::vector<JsonObject>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + values[i].str();
  return raw(key, out + "]");
}

std::string JsonObject::str() const { return "{" + body_ + "}"; }

void write_file_atomically(const std::string& path, const std::string& text) {
  const std::string partial = path + ".part";
  {
    std::ofstream out(partial, std::ios::trunc);
    out << text << "\n";
    if (!out) throw std::runtime_error(partial + ": write failed");
  }
  if (std::rename(partial.c_str(), path.c_str()) != 0) throw std::runtime_error(path + ": rename failed");
}

}  // namespace farm
