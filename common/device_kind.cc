#include "common/device_kind.h"

#include <cstdlib>

#include "common/error.h"
#include "common/printable.h"

namespace ds {

const char* deviceKindName(DeviceKind kind) { return kind == DeviceKind::Cuda ? "cuda" : "cpu"; }

DeviceKind parseDevice(const std::string& name, const std::string& where) {
  for (DeviceKind kind : {DeviceKind::Cpu, DeviceKind::Cuda})
    if (name == deviceKindName(kind)) return kind;
  throw Error(where + ": expected cpu or cuda, got \"" + printable(name) + "\"");
}

DeviceKind selectDevice(const std::string& explicitChoice) {
  if (!explicitChoice.empty()) return parseDevice(explicitChoice, "device");
  const char* env = std::getenv("DS_ACCELERATOR");
  if (env && *env) return parseDevice(env, "DS_ACCELERATOR");
  return DeviceKind::Cpu;
}

}  // namespace ds
