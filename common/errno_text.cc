#include "common/errno_text.h"

#include <cstring>

namespace ds {

std::string errnoText(int err) {
  const char* name = strerrorname_np(err);  // glibc 2.32+; null for an unknown value
  return std::string(std::strerror(err)) + " (" + (name ? std::string(name) + ", " : "") +
         "errno " + std::to_string(err) + ")";
}

}  // namespace ds
