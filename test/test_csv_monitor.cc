// DeepSpeed's csv_monitor: one file per event with Python csv's layout, floats as Python's repr().
// The tensorboard monitor: its Event bytes, and its file decoded frame by frame.
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "common/files.h"
#include "common/crc32c.h"
#include "runtime/monitor/csv_monitor.h"
#include "runtime/monitor/tensorboard_monitor.h"
#include "tensorboard_event.pb.h"
#include "test/scratch_dir.h"

using namespace ds::runtime;

TEST_CASE("csv monitor: floats are written as Python's repr() writes them") {
  // Expected strings are what python3 -c 'print(repr(v))' prints.
  const std::pair<double, const char*> cases[] = {
      {2.0, "2.0"},          {0.001, "0.001"},
      {1e-05, "1e-05"},      {1e16, "1e+16"},
      {1.5e16, "1.5e+16"},   {123456789012345.0, "123456789012345.0"},
      {0.1, "0.1"},          {1.0 / 3, "0.3333333333333333"},
      {1e-4, "0.0001"},      {0.0001234, "0.0001234"},
      {5e-324, "5e-324"},    {1e300, "1e+300"},
      {-0.0, "-0.0"},        {0.00294, "0.00294"},
      {-2.5e-7, "-2.5e-07"}, {1234.5, "1234.5"}};
  for (const auto& [value, text] : cases) {
    INFO(text);
    CHECK(pythonFloat(value) == text);
  }
}

TEST_CASE("csv monitor: one file per event, a header once, CRLF rows") {
  const std::string dir = ds::test::makeScratchDir("csv-monitor");
  CsvMonitor monitor({true, dir + "/out", "job"});
  monitor.write({{"Train/Samples/train_loss", 1.5, 0}, {"Train/Samples/lr", 0.001, 64}});
  monitor.write({{"Train/Samples/train_loss", 0.25, 64}});
  CHECK(ds::readWholeFile(dir + "/out/job/Train_Samples_train_loss.csv", "csv") ==
        "step,train_loss\r\n0,1.5\r\n64,0.25\r\n");
  CHECK(ds::readWholeFile(dir + "/out/job/Train_Samples_lr.csv", "csv") ==
        "step,lr\r\n64,0.001\r\n");
}

TEST_CASE("tensorboard: Events have the bytes the hand-written encoder gave them") {
  // Taken from the field-by-field encoder libprotobuf replaced: wall_time, step (0 included),
  // then file_version or summary { value { tag, simple_value } }.
  const std::string scalar(
      "\x09\x00\x00\x10\xa0\xe8\xa8\xd9\x41\x10\x40\x2a\x21\x0a\x1f\x0a\x18"
      "Train/Samples/train_loss\x15\x00\x00\x20\x40",
      46);
  CHECK(scalarEvent(1722000000.25, 64, "Train/Samples/train_loss", 2.5f) == scalar);
  const std::string version(
      "\x09\x00\x00\x10\xa0\xe8\xa8\xd9\x41\x10\x00\x1a\x0d"
      "brain.Event:2",
      26);
  CHECK(fileVersionEvent(1722000000.25) == version);
}

namespace {

// The records of a TFRecord file, each frame's two masked CRC32Cs checked.
std::vector<std::string> tfRecords(const std::string& bytes) {
  std::vector<std::string> records;
  for (size_t at = 0; at < bytes.size();) {
    REQUIRE(bytes.size() - at >= 12);
    uint64_t length = 0;
    uint32_t lengthCrc = 0, recordCrc = 0;
    std::memcpy(&length, bytes.data() + at, 8);
    std::memcpy(&lengthCrc, bytes.data() + at + 8, 4);
    CHECK(lengthCrc == ds::maskedCrc32c(bytes.data() + at, 8));
    REQUIRE(bytes.size() - at - 12 >= length + 4);
    records.push_back(bytes.substr(at + 12, length));
    std::memcpy(&recordCrc, bytes.data() + at + 12 + length, 4);
    CHECK(recordCrc == ds::maskedCrc32c(records.back().data(), length));
    at += 16 + length;
  }
  return records;
}

}  // namespace

TEST_CASE("tensorboard: the event file decodes into the version record and one Event a value") {
  const std::string dir = ds::test::makeScratchDir("tb-monitor");
  const double before = static_cast<double>(std::chrono::duration_cast<std::chrono::seconds>(
                                                std::chrono::system_clock::now().time_since_epoch())
                                                .count());
  TensorBoardMonitor monitor({true, dir + "/tb", "job"});
  monitor.write({{"Train/Samples/train_loss", 1.5, 0}, {"Train/Samples/lr", 0.001, 64}});
  monitor.write({{"Train/Samples/train_loss", 0.25, 64}});
  const std::vector<std::string> records = tfRecords(ds::readWholeFile(monitor.path(), "events"));
  REQUIRE(records.size() == 4);
  ds::tensorboard::Event version;
  REQUIRE(version.ParseFromString(records[0]));
  CHECK(version.file_version() == "brain.Event:2");
  CHECK(version.has_step());
  CHECK(version.wall_time() >= before);
  const struct {
    const char* tag;
    int64_t step;
    float value;
  } expected[] = {{"Train/Samples/train_loss", 0, 1.5f},
                  {"Train/Samples/lr", 64, 0.001f},
                  {"Train/Samples/train_loss", 64, 0.25f}};
  for (size_t i = 0; i < 3; ++i) {
    INFO("record " << i + 1);
    ds::tensorboard::Event event;
    REQUIRE(event.ParseFromString(records[i + 1]));
    CHECK(event.has_step());
    CHECK(event.step() == expected[i].step);
    CHECK(event.wall_time() >= version.wall_time());
    REQUIRE(event.has_summary());
    REQUIRE(event.summary().value_size() == 1);
    CHECK(event.summary().value(0).tag() == expected[i].tag);
    CHECK(event.summary().value(0).simple_value() == expected[i].value);
  }
}
