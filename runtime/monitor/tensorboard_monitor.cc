// TFRecord framing and the Event / Summary protocol buffers, written field by field:
//   Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
//   Summary { repeated Value value = 1; }   Value { string tag = 1; float simple_value = 2; }
#include "runtime/monitor/tensorboard_monitor.h"

#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>

#include "common/error.h"

namespace ds::runtime {
namespace {

void varint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out += static_cast<char>((value & 0x7f) | 0x80);
    value >>= 7;
  }
  out += static_cast<char>(value);
}

template <typename T>
void little(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(value));
}

void lengthDelimited(std::string& out, int field, const std::string& bytes) {
  varint(out, static_cast<uint64_t>(field) << 3 | 2);
  varint(out, bytes.size());
  out += bytes;
}

double wallTime() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// An Event with wall_time, step and either a file_version or a summary.
std::string event(int64_t step, const std::string* fileVersion, const std::string* summary) {
  std::string out;
  varint(out, 1 << 3 | 1);  // wall_time, 64-bit
  little(out, wallTime());
  varint(out, 2 << 3 | 0);  // step, varint
  varint(out, static_cast<uint64_t>(step));
  if (fileVersion) lengthDelimited(out, 3, *fileVersion);
  if (summary) lengthDelimited(out, 5, *summary);
  return out;
}

}  // namespace

uint32_t crc32c(const void* data, size_t bytes) {
  static const auto table = [] {
    std::vector<uint32_t> t(256);
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = c & 1 ? 0x82f63b78u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t crc = 0xffffffffu;
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return crc ^ 0xffffffffu;
}

uint32_t maskedCrc32c(const void* data, size_t bytes) {
  const uint32_t crc = crc32c(data, bytes);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

TensorBoardMonitor::TensorBoardMonitor(const TensorBoardConfig& config) {
  const std::string dir = (std::filesystem::path(config.outputPath) / config.jobName).string();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error("tensorboard: cannot create " + dir + ": " + ec.message());
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  path_ =
      dir + "/events.out.tfevents." + std::to_string(static_cast<int64_t>(wallTime())) + "." + host;
  out_.open(path_, std::ios::binary | std::ios::trunc);
  if (!out_) throw Error("tensorboard: cannot create " + path_);
  const std::string version = "brain.Event:2";
  writeRecord(event(0, &version, nullptr));
}

void TensorBoardMonitor::writeRecord(const std::string& record) {
  std::string frame;
  little(frame, static_cast<uint64_t>(record.size()));
  const uint32_t lengthCrc = maskedCrc32c(frame.data(), 8);
  little(frame, lengthCrc);
  frame += record;
  little(frame, maskedCrc32c(record.data(), record.size()));
  out_.write(frame.data(), static_cast<std::streamsize>(frame.size()));
  out_.flush();  // readable while the job runs
  if (!out_) throw Error("tensorboard: cannot write " + path_);
}

void TensorBoardMonitor::write(const std::vector<MonitorEvent>& events) {
  for (const MonitorEvent& e : events) {
    std::string value;
    lengthDelimited(value, 1, e.name);
    varint(value, 2 << 3 | 5);  // simple_value, 32-bit
    little(value, static_cast<float>(e.value));
    std::string summary;
    lengthDelimited(summary, 1, value);
    writeRecord(event(e.step, nullptr, &summary));
  }
}

}  // namespace ds::runtime
