// world_info encoding: JSON like Python's json.dumps (", " and ": " separators, ASCII only with
// \uXXXX escapes), then URL-safe base64 with '=' padding.
#include "contract/world_info.h"

#include <limits>
#include <nlohmann/json.hpp>

#include "common/error.h"

namespace ds {
namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

std::string base64UrlEncode(const std::string& bytes) {
  std::string out;
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t chunk = static_cast<uint8_t>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) chunk |= static_cast<uint8_t>(bytes[i + 1]) << 8;
    if (i + 2 < bytes.size()) chunk |= static_cast<uint8_t>(bytes[i + 2]);
    out += kAlphabet[(chunk >> 18) & 63];
    out += kAlphabet[(chunk >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(chunk >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kAlphabet[chunk & 63] : '=';
  }
  return out;
}

std::string base64UrlDecode(const std::string& text) {
  std::string out;
  uint32_t buffer = 0;
  int bits = 0;
  for (char c : text) {
    if (c == '=') break;
    const char* at = std::char_traits<char>::find(kAlphabet, 64, c);
    if (at == nullptr) throw Error(std::string("--world_info: '") + c + "' is not URL-safe base64");
    buffer = (buffer << 6) | static_cast<uint32_t>(at - kAlphabet);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((buffer >> bits) & 0xff);
    }
  }
  return out;
}

// json.dumps(ensure_ascii=True) string literal.
std::string pythonJsonString(const std::string& utf8) {
  // Host names are validated UTF-8 (launcher/hostfile.h); anything else would not throw here.
  const std::string dumped =
      nlohmann::json(utf8).dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
  return dumped;
}

}  // namespace

std::string encodeWorldInfo(const WorldInfo& world) {
  std::string json = "{";
  for (size_t n = 0; n < world.size(); ++n) {
    json += (n ? ", " : "") + pythonJsonString(world[n].first) + ": [";
    for (size_t i = 0; i < world[n].second.size(); ++i)
      json += (i ? ", " : "") + std::to_string(world[n].second[i]);
    json += "]";
  }
  return base64UrlEncode(json + "}");
}

WorldInfo decodeWorldInfo(const std::string& base64) {
  const auto json = nlohmann::ordered_json::parse(base64UrlDecode(base64), nullptr, false);
  if (!json.is_object()) throw Error("--world_info: not a base64 JSON object of host -> slots");
  // A node agent starts one process per slot: bound what a command line can ask for.
  constexpr size_t kMaxSlots = 65536;
  WorldInfo world;
  size_t total = 0;
  for (const auto& [host, slots] : json.items()) {
    if (!slots.is_array()) throw Error("--world_info: slots of " + host + " are not a list");
    std::vector<int> ids;
    for (const auto& slot : slots) {
      if (!slot.is_number_integer() || slot.get<int64_t>() < 0 ||
          slot.get<int64_t>() > std::numeric_limits<int>::max())
        throw Error("--world_info: a slot of " + host + " is not a slot number");
      if (++total > kMaxSlots)
        throw Error("--world_info: more than " + std::to_string(kMaxSlots) + " slots");
      ids.push_back(static_cast<int>(slot.get<int64_t>()));
    }
    world.emplace_back(host, std::move(ids));
  }
  return world;
}

}  // namespace ds
