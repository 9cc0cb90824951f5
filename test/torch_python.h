// The Python interpreter whose PyTorch the reference tests run (test/reference/*.py): Debian's
// /usr/bin/python3 with python3-torch (scripts/setup --test), or DS_TORCH_PYTHON.
#pragma once

#include <cstdlib>
#include <string>

namespace ds::test {

inline std::string torchPython() {
  const char* env = std::getenv("DS_TORCH_PYTHON");
  return env && *env ? env : "/usr/bin/python3";
}

inline bool torchAvailable() {
  return std::system((torchPython() + " -c 'import torch' >/dev/null 2>&1").c_str()) == 0;
}

}  // namespace ds::test
