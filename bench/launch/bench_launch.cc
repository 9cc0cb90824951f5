// bench_launch: time from starting the launcher to every rank joined, one barrier and a clean
// exit, for a no-op job on this machine, beside torchrun doing the same work (torch's gloo
// init_process_group + barrier) measured in the same run.
// Usage: bench_launch [--ranks 2,16,64] [--repeats 3] [--torchrun_max_ranks 64]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_cli.h"
#include "bench/free_port.h"
#include "common/guarded_main.h"

namespace {

double timeCommand(const std::string& command) {
  const auto start = std::chrono::steady_clock::now();
  const int status = std::system(command.c_str());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return status == 0 ? seconds : -1.0;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values.empty() ? -1.0 : values[values.size() / 2];
}

}  // namespace

int run(int argc, char** argv) {
  std::vector<int> rankCounts = {2, 16, 64};
  int repeats = 3;
  int torchrunMaxRanks = 64;
  CLI::App app{
      "bench_launch: ds-launch start -> all ranks joined -> one barrier -> clean exit, "
      "beside torchrun"};
  ds::bench::showDefaults(app);
  app.add_option("--ranks", rankCounts, "rank counts to time (comma-separated)")
      ->delimiter(',')
      ->check(CLI::Range(1, 4096));
  app.add_option("--repeats", repeats, "runs per rank count (the median is printed)")
      ->check(CLI::Range(1, 100));
  app.add_option("--torchrun_max_ranks", torchrunMaxRanks,
                 "largest rank count torchrun is timed at")
      ->check(CLI::Range(0, 4096));
  if (auto status = ds::parseCommandLine(app, argc, argv)) return *status;
  const std::string binDir = std::filesystem::canonical("/proc/self/exe").parent_path().string();
  const std::string launch = binDir + "/ds-launch";
  const std::string dir = "/tmp/bench-launch-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/noop.py") << "import torch.distributed as dist\n"
                                     "dist.init_process_group('gloo')\n"
                                     "dist.barrier()\n"
                                     "dist.destroy_process_group()\n";
  const bool haveTorch =
      std::system("/usr/bin/python3 -c 'import torch.distributed' >/dev/null 2>&1") == 0;

  std::printf("bench_launch: start -> all ranks joined -> one barrier -> clean exit (%u cores)\n",
              std::max(1u, std::thread::hardware_concurrency()));
  std::printf("%6s %14s %14s %10s\n", "ranks", "ds-launch s", "torchrun s", "speedup");
  for (int ranks : rankCounts) {
    std::ofstream(dir + "/hostfile") << "localhost slots=" << ranks << "\n";
    std::vector<double> ours;
    for (int r = 0; r < repeats; ++r)
      ours.push_back(timeCommand("cd " + dir + " && " + launch +
                                 " -H hostfile --master_port 0 --log_dir logs barrier "
                                 ">/dev/null 2>" +
                                 dir + "/ds.err"));
    double theirs = -1.0;
    if (haveTorch && ranks <= torchrunMaxRanks) {
      std::vector<double> runs;
      for (int r = 0; r < std::max(1, repeats / 2); ++r)
        runs.push_back(
            timeCommand("cd " + dir + " && OMP_NUM_THREADS=1 timeout 600 /usr/bin/python3 -m " +
                        "torch.distributed.run --nproc_per_node " + std::to_string(ranks) +
                        " --master_port " + std::to_string(ds::bench::freeLoopbackPort()) +
                        " --redirects 1 --tee 1 noop.py >/dev/null 2>" + dir + "/tr.err"));
      theirs = median(runs);
    }
    const double ourTime = median(ours);
    if (theirs > 0 && ourTime > 0)
      std::printf("%6d %14.3f %14.3f %9.1fx\n", ranks, ourTime, theirs, theirs / ourTime);
    else
      std::printf("%6d %14.3f %14s %10s\n", ranks, ourTime,
                  haveTorch ? (ranks <= torchrunMaxRanks ? "failed" : "skipped") : "no torch", "-");
  }
  std::printf("targets: 10x torchrun at 2 ranks; 64 ranks under 1.5 s\n");
  std::filesystem::remove_all(dir);
  return 0;
}

int main(int argc, char** argv) {
  return ds::guardedMain("bench_launch", [&] { return run(argc, argv); });
}
