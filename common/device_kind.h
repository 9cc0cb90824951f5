// Which device a job computes on: train --device and DeepSpeed's DS_ACCELERATOR, parsed once into
// this enum. The launcher and the worker decide with it; the backends behind each kind are
// kernels/accelerator.h's.
#pragma once

#include <string>

namespace ds {

enum class DeviceKind { Cpu, Cuda };

const char* deviceKindName(DeviceKind kind);  // "cpu", "cuda"

// "cpu" or "cuda"; anything else is a ds::Error naming `where` (the flag, key or variable), the
// value and the accepted ones.
DeviceKind parseDevice(const std::string& name, const std::string& where = "device");

// The device of a job: `explicitChoice` (--device or the config's key) when not empty, else
// DeepSpeed's DS_ACCELERATOR variable when set, else the CPU.
DeviceKind selectDevice(const std::string& explicitChoice = "");

}  // namespace ds
