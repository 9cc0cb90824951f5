// Forwarded exports: numbered carriers, decoded in number order.
#include "contract/forwarded_env.h"

#include <cstdlib>
#include <cstring>
#include <map>

extern char** environ;

namespace ds {

VariableList forwardedExportVariables(const VariableList& exports) {
  VariableList carriers;
  for (size_t i = 0; i < exports.size(); ++i)
    carriers.emplace_back(kForwardedExportPrefix + std::to_string(i),
                          exports[i].first + "=" + exports[i].second);
  return carriers;
}

int adoptForwardedExports() {
  const size_t prefixLength = std::strlen(kForwardedExportPrefix);
  std::map<long, std::pair<std::string, std::string>> byNumber;  // carrier number -> its text
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string text = *entry;
    if (text.compare(0, prefixLength, kForwardedExportPrefix) != 0) continue;
    const size_t equals = text.find('=');
    if (equals == std::string::npos) continue;
    char* end = nullptr;
    const long number = std::strtol(text.c_str() + prefixLength, &end, 10);
    if (end != text.c_str() + equals) continue;
    byNumber[number] = {text.substr(0, equals), text.substr(equals + 1)};
  }
  int adopted = 0;
  for (const auto& [number, carrier] : byNumber) {
    // The value may be secret (a TLS key): erase it from the initial environment block too,
    // which /proc/PID/environ would go on showing after unsetenv.
    if (char* text = std::getenv(carrier.first.c_str())) std::memset(text, 'x', std::strlen(text));
    unsetenv(carrier.first.c_str());
    const size_t equals = carrier.second.find('=');
    if (equals == 0 || equals == std::string::npos) continue;
    setenv(carrier.second.substr(0, equals).c_str(), carrier.second.c_str() + equals + 1, 1);
    ++adopted;
  }
  return adopted;
}

}  // namespace ds
