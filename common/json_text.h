// Parsing JSON text a user gave (a config, a vocabulary, a sweep, a manifest, a corpus line):
// nesting is bounded before nlohmann builds anything, because copying, comparing or printing a
// parsed value recurses once per level and a 100,000-deep file would overflow the stack; a NUL
// byte is refused; every error names the source. It does not check what the document means.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace ds {

enum class DuplicateKeys {
  Refuse,    // as DeepSpeed's config loader: a key given twice in one object is an error
  LastWins,  // as Python's json.loads
};

struct JsonTextRules {
  int maxDepth = 64;  // levels of [ and { (more than any config or vocabulary has)
  DuplicateKeys duplicateKeys = DuplicateKeys::Refuse;
};

// Throws ds::Error "SOURCE: nested more than N levels deep at line L, column C" at the first
// bracket past maxDepth. Brackets inside strings do not count. Linear, no recursion, no allocation.
void checkJsonNesting(std::string_view text, const std::string& source, int maxDepth);

// Throws ds::Error "SOURCE: ..." for a NUL byte, too deep a nesting, a duplicate key (when
// refused) or invalid JSON (nlohmann's message gives the line and column).
nlohmann::json parseJsonText(std::string_view text, const std::string& source,
                             const JsonTextRules& rules = {});
nlohmann::ordered_json parseOrderedJsonText(std::string_view text, const std::string& source,
                                            const JsonTextRules& rules = {});

}  // namespace ds
