// Secrets are compared in time that does not depend on where they differ (the job token, by the
// coordinator and by node relays).
#pragma once

#include <string>

namespace ds {

inline bool constantTimeEquals(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i)
    diff |= static_cast<unsigned char>(a[i]) ^ static_cast<unsigned char>(b[i]);
  return diff == 0;
}

}  // namespace ds
