// JsonReader: typed access to one parsed config document, turning every mismatch into
// "SOURCE: JSON.PATH: expected X, got Y". Shared by the parsers of each config block
// (ds_config.cc, optimizer_config.cc, scheduler_config.cc); only config .cc files include it.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace ds::runtime {

// ordered_json keeps file order, so warnings come out in the order the user wrote the keys.
using Json = nlohmann::ordered_json;

// "prefix.key", or "key" at the top level.
std::string joinPath(const std::string& prefix, std::string_view key);
// The value as JSON text, shortened so a huge array cannot flood the message.
std::string describeJson(const Json& v);

class JsonReader {
 public:
  JsonReader(std::string_view source, std::vector<std::string>& warnings)
      : source_(source), warnings_(warnings) {}

  [[noreturn]] void fail(const std::string& path, const std::string& message) const;
  void warn(const std::string& message);

  // DeepSpeed reads keys with dict.get, so an explicit null is the same as an absent key.
  static const Json* member(const Json& object, std::string_view key);

  const Json& object(const Json& v, const std::string& path) const;
  // nlohmann keeps booleans apart from numbers, so `true` is rejected here (Python would not).
  double number(const Json& v, const std::string& path) const;
  double nonNegative(const Json& v, const std::string& path) const;
  // An integer, also written as an integral float (40.0, 5e8); fractional values are errors.
  int64_t integer(const Json& v, const std::string& path) const;
  // An integer written as one: 10.0 and 1e3 are refused too, for the keys where DeepSpeed checks
  // isinstance(value, int) (elasticity.micro_batch_sizes, warmup_num_steps,
  // lr_range_test_step_size); the message says what to write instead.
  int64_t exactInteger(const Json& v, const std::string& path) const;
  bool boolean(const Json& v, const std::string& path) const;
  std::string string(const Json& v, const std::string& path) const;

  // Optional fields: `out` keeps its default when the key is absent or null; path = prefix.key.
  void readNumber(const Json& obj, const std::string& prefix, std::string_view key,
                  double& out) const;
  void readNonNegative(const Json& obj, const std::string& prefix, std::string_view key,
                       double& out) const;
  void readInt(const Json& obj, const std::string& prefix, std::string_view key, int64_t& out,
               int64_t min) const;
  void readExactInt(const Json& obj, const std::string& prefix, std::string_view key, int64_t& out,
                    int64_t min) const;
  void readBool(const Json& obj, const std::string& prefix, std::string_view key, bool& out) const;
  // A number >= 0 that DeepSpeed also takes as a list with one value per parameter group
  // (warmup_min_lr, cycle_max_lr, ...): a one-element list is that value, a longer one an error.
  void readPerGroupNonNegative(const Json& obj, const std::string& prefix, std::string_view key,
                               double& out) const;

  // One warning per key not in `known`, with the closest known key as a suggestion.
  void warnUnknownKeys(const Json& object, const std::string& prefix,
                       const std::vector<std::string_view>& known);
  // Like warnUnknownKeys, but an error: for blocks where a typo silently changes the run
  // (optimizer and scheduler params).
  void rejectUnknownKeys(const Json& object, const std::string& prefix,
                         const std::vector<std::string_view>& known) const;

 private:
  // readInt and readExactInt: the key read by `rule` (integer or exactInteger), then >= min.
  using IntegerRule = int64_t (JsonReader::*)(const Json&, const std::string&) const;
  void readIntAtLeast(const Json& obj, const std::string& prefix, std::string_view key,
                      int64_t& out, int64_t min, IntegerRule rule) const;
  std::string source_;
  std::vector<std::string>& warnings_;
};

}  // namespace ds::runtime
