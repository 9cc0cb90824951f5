// parseJsonText: see the header.
#include "runtime/common/json_text.h"

#include <set>
#include <vector>

#include "common/error.h"

namespace ds::runtime {
namespace {

std::string lineAndColumn(std::string_view text, size_t offset) {
  size_t line = 1, column = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i)
    text[i] == '\n' ? (++line, column = 1) : ++column;
  return "line " + std::to_string(line) + ", column " + std::to_string(column);
}

template <class J>
J parseWith(std::string_view text, const std::string& source, const JsonTextRules& rules) {
  // A NUL byte ends the text for C-string readers; anything after it would be ignored by some
  // tools and read by others.
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos)
    throw Error(source + ": a NUL byte at offset " + std::to_string(nul) +
                " (not a JSON text file)");
  checkJsonNesting(text, source, rules.maxDepth);
  // nlohmann keeps one of two equal keys silently; the keys seen so far in each open object.
  std::vector<std::set<std::string>> open;
  auto onEvent = [&](int, typename J::parse_event_t event, J& parsed) {
    if (event == J::parse_event_t::object_start) open.emplace_back();
    if (event == J::parse_event_t::object_end) open.pop_back();
    if (event == J::parse_event_t::key &&
        !open.back().insert(parsed.template get<std::string>()).second)
      throw Error(source + ": duplicate key " +
                  parsed.dump(-1, ' ', false, J::error_handler_t::replace) +
                  " in a JSON object; give each key once");
    return true;
  };
  try {
    if (rules.duplicateKeys == DuplicateKeys::LastWins) return J::parse(text.begin(), text.end());
    return J::parse(text.begin(), text.end(), onEvent);
  } catch (const typename J::parse_error& e) {
    throw Error(source + ": invalid JSON at byte " + std::to_string(e.byte) + ": " + e.what());
  } catch (const typename J::exception& e) {  // e.g. out_of_range: a number beyond double (1e400)
    throw Error(source + ": invalid JSON: " + e.what());
  }
}

}  // namespace

void checkJsonNesting(std::string_view text, const std::string& source, int maxDepth) {
  int depth = 0;
  bool inString = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (inString) {
      if (c == '\\')
        ++i;  // the escaped character cannot end the string
      else if (c == '"')
        inString = false;
    } else if (c == '"') {
      inString = true;
    } else if (c == '[' || c == '{') {
      if (++depth > maxDepth)
        throw Error(source + ": nested more than " + std::to_string(maxDepth) + " levels deep at " +
                    lineAndColumn(text, i) + "; is it the right file?");
    } else if (c == ']' || c == '}') {
      --depth;  // unbalanced text is the parser's to report
    }
  }
}

nlohmann::json parseJsonText(std::string_view text, const std::string& source,
                             const JsonTextRules& rules) {
  return parseWith<nlohmann::json>(text, source, rules);
}

nlohmann::ordered_json parseOrderedJsonText(std::string_view text, const std::string& source,
                                            const JsonTextRules& rules) {
  return parseWith<nlohmann::ordered_json>(text, source, rules);
}

}  // namespace ds::runtime
