// TFRecord framing around Event protocol buffers (tensorboard_event.proto, encoded by libprotobuf):
// per record, the u64 length, its masked CRC32C, the record, the record's masked CRC32C.
#include "runtime/monitor/tensorboard_monitor.h"

#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>

#include "common/crc32c.h"
#include "common/error.h"
#include "tensorboard_event.pb.h"

namespace ds::runtime {
namespace {

template <typename T>
void little(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(value));
}

double wallTime() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

std::string fileVersionEvent(double wallTime) {
  tensorboard::Event event;
  event.set_wall_time(wallTime);
  event.set_step(0);
  event.set_file_version("brain.Event:2");
  return event.SerializeAsString();
}

std::string scalarEvent(double wallTime, int64_t step, const std::string& tag, float value) {
  tensorboard::Event event;
  event.set_wall_time(wallTime);
  event.set_step(step);
  tensorboard::Summary::Value* v = event.mutable_summary()->add_value();
  v->set_tag(tag);
  v->set_simple_value(value);
  return event.SerializeAsString();
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
  writeRecord(fileVersionEvent(wallTime()));
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
  for (const MonitorEvent& e : events)
    writeRecord(scalarEvent(wallTime(), e.step, e.name, static_cast<float>(e.value)));
}

}  // namespace ds::runtime
