// Monitors through a real job: csv_monitor on rank 0 writes DeepSpeed's event files, which
// Python's csv module reads back; tensorboard writes a TFRecord event file that an independent
// reader (test/reference/read_tfevents.py: framing, CRC32C, protobuf wire format) decodes.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "test/launch_harness.h"

using namespace ds::test;
using namespace std::chrono_literals;

TEST_CASE("monitor: csv_monitor writes train_loss, lr and loss_scale per step on rank 0") {
  const std::string dir = makeScratchDir("csv-job");
  writeFile(dir + "/hostfile", "127.0.0.1 slots=2\n");
  writeFile(dir + "/config.json",
            R"({"train_micro_batch_size_per_gpu": 8, "fp16": {"enabled": true},
                "optimizer": {"type": "Adam", "params": {"lr": 0.01}}, "wall_clock_breakdown": true,
                "csv_monitor": {"enabled": true, "output_path": "monitor", "job_name": "run1"}})");
  auto job = startLaunch(dir, {"-H", "hostfile", "--master_port", "0", "--log_dir", "logs", "train",
                               "--config", "config.json", "--steps", "5"});
  REQUIRE(waitExit(job, 60s) == 0);
  const std::string loss = readFile(dir + "/monitor/run1/Train_Samples_train_loss.csv");
  CHECK(loss.starts_with("step,train_loss\r\n0,"));
  CHECK(loss.find("\r\n64,") != std::string::npos);  // 16 samples a step: 0, 16, ..., 64
  CHECK(readFile(dir + "/monitor/run1/Train_Samples_lr.csv").starts_with("step,lr\r\n16,0.01\r\n"));
  CHECK(readFile(dir + "/monitor/run1/Train_Samples_loss_scale.csv")
            .starts_with("step,loss_scale\r\n16,"));
  // wall_clock_breakdown adds DeepSpeed's timer events.
  for (const std::string timer : {"forward", "backward", "backward_allreduce", "step"})
    CHECK(readFile(dir + "/monitor/run1/Train_Samples_elapsed_time_ms_" + timer + ".csv")
              .starts_with("step,elapsed_time_ms_" + timer + "\r\n16,"));
  // Python's csv module reads every row, with float values.
  const std::string check =
      "cd " + dir +
      "/monitor/run1 && /usr/bin/python3 -c \"import csv; rows = list(csv.reader("
      "open('Train_Samples_train_loss.csv'))); assert rows[0] == ['step', 'train_loss']; "
      "assert [int(r[0]) for r in rows[1:]] == [0, 16, 32, 48, 64]; [float(r[1]) for r in "
      "rows[1:]]\"";
  CHECK(std::system(check.c_str()) == 0);
}

TEST_CASE("monitor: tensorboard writes a real event file with every step's values") {
  const std::string dir = makeScratchDir("tb-job");
  writeFile(dir + "/hostfile", "127.0.0.1 slots=2\n");
  writeFile(dir + "/config.json",
            R"({"train_micro_batch_size_per_gpu": 8, "fp16": {"enabled": true},
                "optimizer": {"type": "Adam", "params": {"lr": 0.01}},
                "tensorboard": {"enabled": true, "output_path": "tb", "job_name": "run1"}})");
  auto job = startLaunch(dir, {"-H", "hostfile", "--master_port", "0", "--log_dir", "logs", "train",
                               "--config", "config.json", "--steps", "4"});
  REQUIRE(waitExit(job, 60s) == 0);
  std::string eventFile;
  for (const auto& entry : std::filesystem::directory_iterator(dir + "/tb/run1"))
    if (entry.path().filename().string().starts_with("events.out.tfevents."))
      eventFile = entry.path();
  REQUIRE(!eventFile.empty());
  FILE* pipe = popen(("/usr/bin/python3 " + std::string(DS_SOURCE_DIR) +
                      "/test/reference/read_tfevents.py " + eventFile)
                         .c_str(),
                     "r");
  REQUIRE(pipe != nullptr);
  std::string out;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof(buffer), pipe)) > 0;) out.append(buffer, n);
  REQUIRE(pclose(pipe) == 0);  // every CRC checked, every record decoded
  std::istringstream lines(out);
  std::vector<nlohmann::json> records;
  for (std::string line; std::getline(lines, line);) records.push_back(nlohmann::json::parse(line));
  REQUIRE(records.size() == 1 + 4 * 3);  // the version record, then 3 values a step
  CHECK(records[0]["file_version"] == "brain.Event:2");
  int losses = 0;
  for (size_t i = 1; i < records.size(); ++i) {
    const auto& r = records[i];
    CHECK(r["wall_time"].get<double>() > 1e9);
    if (r["tag"] == "Train/Samples/train_loss") {
      CHECK(r["step"] == 16 * losses);
      CHECK(r["value"].get<double>() > 0);
      ++losses;
    } else if (r["tag"] == "Train/Samples/lr") {
      CHECK(r["value"].get<double>() == Approx(0.01));
    } else {
      CHECK(r["tag"] == "Train/Samples/loss_scale");
      const double scale = r["value"].get<double>();  // dynamic: a power of two
      CHECK(scale >= 1.0);
      CHECK(std::exp2(std::round(std::log2(scale))) == scale);
    }
  }
  CHECK(losses == 4);
}
