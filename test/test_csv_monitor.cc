// DeepSpeed's csv_monitor: one file per event with Python csv's layout, floats as Python's repr().
#include <catch2/catch.hpp>
#include <string>

#include "common/files.h"
#include "runtime/monitor/csv_monitor.h"
#include "runtime/monitor/tensorboard_monitor.h"
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

TEST_CASE("tensorboard: CRC32C and TFRecord's mask") {
  CHECK(crc32c("123456789", 9) == 0xe3069283u);  // the standard check value
  const uint64_t length = 0;
  CHECK(maskedCrc32c(&length, 8) ==
        ((([](uint32_t c) { return (c >> 15) | (c << 17); })(crc32c(&length, 8))) + 0xa282ead8u));
}
