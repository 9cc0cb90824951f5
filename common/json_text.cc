// parseJsonText: see the header.
#include "common/json_text.h"

#include <set>
#include <vector>

#include "common/error.h"

namespace ds {
namespace {

std::string lineAndColumn(std::string_view text, size_t offset) {
  size_t line = 1, column = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i)
    text[i] == '\n' ? (++line, column = 1) : ++column;
  return "line " + std::to_string(line) + ", column " + std::to_string(column);
}

// A pass over the text that only looks at keys: a key given twice in one object throws.
// (nlohmann's callback parser could refuse it while building, but on every object it closes it
// rescans the parent for discarded values: quadratic, a minute for 13 MB of shard entries.)
template <class J>
struct DuplicateKeyFinder : nlohmann::json_sax<J> {
  using typename nlohmann::json_sax<J>::number_integer_t;
  using typename nlohmann::json_sax<J>::number_unsigned_t;
  using typename nlohmann::json_sax<J>::number_float_t;
  using typename nlohmann::json_sax<J>::string_t;
  using typename nlohmann::json_sax<J>::binary_t;

  explicit DuplicateKeyFinder(const std::string& source) : source_(source) {}
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    open_.emplace_back();
    return true;
  }
  bool key(string_t& name) override {
    if (!open_.back().insert(name).second)
      throw Error(source_ + ": duplicate key " +
                  J(name).dump(-1, ' ', false, J::error_handler_t::replace) +
                  " in a JSON object; give each key once");
    return true;
  }
  bool end_object() override {
    open_.pop_back();
    return true;
  }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  // Invalid JSON is reported by the parse that follows, with nlohmann's own message.
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

 private:
  const std::string& source_;
  std::vector<std::set<std::string>> open_;  // the keys seen so far in each open object
};

template <class J>
J parseWith(std::string_view text, const std::string& source, const JsonTextRules& rules) {
  // A NUL byte ends the text for C-string readers; anything after it would be ignored by some
  // tools and read by others.
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos)
    throw Error(source + ": a NUL byte at offset " + std::to_string(nul) +
                " (not a JSON text file)");
  checkJsonNesting(text, source, rules.maxDepth);
  try {
    if (rules.duplicateKeys == DuplicateKeys::Refuse) {
      DuplicateKeyFinder<J> finder(source);
      J::sax_parse(text.begin(), text.end(), &finder);
    }
    return J::parse(text.begin(), text.end());
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

}  // namespace ds
