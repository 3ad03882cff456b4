// A small JSON writer for result.json and error.json: objects, arrays, strings, numbers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace farm {

std::string json_string(const std::string& text);
// A finite double as JSON; NaN and infinities (which JSON has no word for) become null.
std::string json_number(double value);

class JsonObject {
 public:
  JsonObject& add(const std::string& key, const std::string& value);
  JsonObject& add(const std::string& key, const char* value);
  JsonObject& add(const std::string& key, double value);
  JsonObject& add(const std::string& key, int64_t value);
  JsonObject& add(const std::string& key, int value);
  JsonObject& add(const std::string& key, bool value);
  JsonObject& add(const std::string& key, const std::vector<double>& values);
  JsonObject& add(const std::string& key, const std::vector<int64_t>& values);
  JsonObject& add(const std::string& key, const std::vector<std::string>& values);
  JsonObject& add(const std::string& key, const JsonObject& value);
  JsonObject& add(const std::string& key, const std::vector<JsonObject>& values);
  JsonObject& add_null(const std::string& key);
  std::string str() const;

 private:
  JsonObject& raw(const std::string& key, const std::string& json);
  std::string body_;
};

// Write `text` to `path` through a temporary file and a rename, so a reader never sees half of it.
void write_file_atomically(const std::string& path, const std::string& text);

}  // namespace farm
