// JsonReader: see the header.
#include "runtime/config/json_reader.h"

#include <cmath>
#include <limits>

#include "common/error.h"
#include "runtime/config/auto_value.h"
#include "runtime/config/closest_key.h"

namespace ds::runtime {
namespace {

bool contains(const std::vector<std::string_view>& keys, std::string_view key) {
  for (std::string_view k : keys)
    if (k == key) return true;
  return false;
}

std::string unknownKeyMessage(const std::string& prefix, const std::string& key,
                              const std::vector<std::string_view>& known) {
  std::string message = "unknown key \"" + joinPath(prefix, key) + "\"";
  const std::string suggestion = closestKey(key, known);
  if (!suggestion.empty()) message += " (did you mean \"" + joinPath(prefix, suggestion) + "\"?)";
  return message;
}

}  // namespace

std::string joinPath(const std::string& prefix, std::string_view key) {
  return prefix.empty() ? std::string(key) : prefix + "." + std::string(key);
}

std::string describeJson(const Json& v) {
  std::string text = v.dump();
  return text.size() > 60 ? text.substr(0, 57) + "..." : text;
}

void JsonReader::fail(const std::string& path, const std::string& message) const {
  throw Error(source_ + ": " + path + ": " + message);
}

void JsonReader::warn(const std::string& message) { warnings_.push_back(source_ + ": " + message); }

const Json* JsonReader::member(const Json& object, std::string_view key) {
  auto it = object.find(std::string(key));
  return (it == object.end() || it->is_null()) ? nullptr : &*it;
}

const Json& JsonReader::object(const Json& v, const std::string& path) const {
  if (!v.is_object()) fail(path, "expected an object, got " + describeJson(v));
  return v;
}

double JsonReader::number(const Json& v, const std::string& path) const {
  if (isAutoValue(v)) fail(path, autoValueMessage(path));
  if (!v.is_number()) fail(path, "expected a number, got " + describeJson(v));
  return v.get<double>();
}

double JsonReader::nonNegative(const Json& v, const std::string& path) const {
  const double x = number(v, path);
  if (!(x >= 0.0)) fail(path, "expected a number >= 0, got " + describeJson(v));
  return x;
}

int64_t JsonReader::integer(const Json& v, const std::string& path) const {
  if (isAutoValue(v)) fail(path, autoValueMessage(path));
  // DeepSpeed does arithmetic with whatever JSON gives it, so 40.0 and 5e8 are the integers they
  // denote wherever a count is expected; a fractional value is still an error.
  if (v.is_number_float()) {
    const double x = v.get<double>();
    // Range check first: casting an out-of-range double to int64_t is undefined.
    if (!(std::fabs(x) < 9.0e18) || x != std::trunc(x))
      fail(path, "expected a whole number, got " + describeJson(v));
    return static_cast<int64_t>(x);
  }
  if (!v.is_number_integer()) fail(path, "expected an integer, got " + describeJson(v));
  if (v.is_number_unsigned() &&
      v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    fail(path, "integer " + describeJson(v) + " is too large");
  }
  return v.get<int64_t>();
}

int64_t JsonReader::exactInteger(const Json& v, const std::string& path) const {
  if (v.is_number_float()) {
    const double x = v.get<double>();
    std::string message =
        "expected an integer, got " + describeJson(v) + " (DeepSpeed refuses a float here too)";
    if (std::fabs(x) < 9.0e18 && x == std::trunc(x))
      message += "; write " + std::to_string(static_cast<int64_t>(x));
    fail(path, message);
  }
  return integer(v, path);
}

bool JsonReader::boolean(const Json& v, const std::string& path) const {
  if (isAutoValue(v)) fail(path, autoValueMessage(path));
  if (!v.is_boolean()) fail(path, "expected true or false, got " + describeJson(v));
  return v.get<bool>();
}

std::string JsonReader::string(const Json& v, const std::string& path) const {
  if (!v.is_string()) fail(path, "expected a string, got " + describeJson(v));
  return v.get<std::string>();
}

void JsonReader::readNumber(const Json& obj, const std::string& prefix, std::string_view key,
                            double& out) const {
  if (const Json* v = member(obj, key)) out = number(*v, joinPath(prefix, key));
}

void JsonReader::readNonNegative(const Json& obj, const std::string& prefix, std::string_view key,
                                 double& out) const {
  if (const Json* v = member(obj, key)) out = nonNegative(*v, joinPath(prefix, key));
}

void JsonReader::readInt(const Json& obj, const std::string& prefix, std::string_view key,
                         int64_t& out, int64_t min) const {
  readIntAtLeast(obj, prefix, key, out, min, &JsonReader::integer);
}

void JsonReader::readExactInt(const Json& obj, const std::string& prefix, std::string_view key,
                              int64_t& out, int64_t min) const {
  readIntAtLeast(obj, prefix, key, out, min, &JsonReader::exactInteger);
}

void JsonReader::readIntAtLeast(const Json& obj, const std::string& prefix, std::string_view key,
                                int64_t& out, int64_t min, IntegerRule rule) const {
  const Json* v = member(obj, key);
  if (!v) return;
  out = (this->*rule)(*v, joinPath(prefix, key));
  if (out < min)
    fail(joinPath(prefix, key),
         "expected an integer >= " + std::to_string(min) + ", got " + describeJson(*v));
}

void JsonReader::readPerGroupNonNegative(const Json& obj, const std::string& prefix,
                                         std::string_view key, double& out) const {
  const Json* v = member(obj, key);
  if (!v) return;
  const std::string path = joinPath(prefix, key);
  if (v->is_array()) {
    // DeepSpeed takes one value per optimizer parameter group; the engine has exactly one group.
    if (v->size() != 1)
      fail(path, std::to_string(v->size()) +
                     " values given, one per parameter group, but this "
                     "engine has one parameter group: give one value");
    out = nonNegative((*v)[0], path + "[0]");
    return;
  }
  out = nonNegative(*v, path);
}

void JsonReader::readBool(const Json& obj, const std::string& prefix, std::string_view key,
                          bool& out) const {
  if (const Json* v = member(obj, key)) out = boolean(*v, joinPath(prefix, key));
}

void JsonReader::warnUnknownKeys(const Json& object, const std::string& prefix,
                                 const std::vector<std::string_view>& known) {
  for (auto it = object.begin(); it != object.end(); ++it)
    if (!contains(known, it.key())) warn(unknownKeyMessage(prefix, it.key(), known));
}

void JsonReader::rejectUnknownKeys(const Json& object, const std::string& prefix,
                                   const std::vector<std::string_view>& known) const {
  for (auto it = object.begin(); it != object.end(); ++it)
    if (!contains(known, it.key()))
      throw Error(source_ + ": " + unknownKeyMessage(prefix, it.key(), known));
}

}  // namespace ds::runtime
