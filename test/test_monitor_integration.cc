// Monitors through a real job: csv_monitor on rank 0 writes DeepSpeed's event files, which
// Python's csv module reads back.
#include <catch2/catch.hpp>
#include <cstdio>
#include <string>

#include "test/launch_harness.h"

using namespace ds::test;
using namespace std::chrono_literals;

TEST_CASE("monitor: csv_monitor writes train_loss, lr and loss_scale per step on rank 0") {
  const std::string dir = makeScratchDir("csv-job");
  writeFile(dir + "/hostfile", "127.0.0.1 slots=2\n");
  writeFile(dir + "/config.json",
            R"({"train_micro_batch_size_per_gpu": 8, "fp16": {"enabled": true},
                "optimizer": {"type": "Adam", "params": {"lr": 0.01}},
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
  // Python's csv module reads every row, with float values.
  const std::string check =
      "cd " + dir +
      "/monitor/run1 && /usr/bin/python3 -c \"import csv; rows = list(csv.reader("
      "open('Train_Samples_train_loss.csv'))); assert rows[0] == ['step', 'train_loss']; "
      "assert [int(r[0]) for r in rows[1:]] == [0, 16, 32, 48, 64]; [float(r[1]) for r in "
      "rows[1:]]\"";
  CHECK(std::system(check.c_str()) == 0);
}
