// ds-nvme-tune: DeepSpeed's ds_nvme_tune. Sweeps the offload I/O engine's knobs (block size,
// queue depth, threads, single_submit, overlap_events) on a directory, shows progress, and prints
// the best read and write GB/s with the `aio` block that reaches them (and fio's figures for the
// same knobs when fio is installed).
//   ds-nvme-tune --nvme_dir DIR [--io_size BYTES] [--sweep_config FILE] [--no_read] [--no_write]
//                [--loops N]
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/command_line.h"
#include "common/error.h"
#include "common/guarded_main.h"
#include "contract/job_args.h"
#include "common/files.h"
#include "common/json_text.h"
#include "runtime/offload/aio_engine.h"
#include "bench/fio_baseline.h"

namespace {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

struct Sweep {
  std::vector<int64_t> blockSize = {256 << 10, 1 << 20, 4 << 20};
  std::vector<int64_t> queueDepth = {4, 8, 32};
  std::vector<int64_t> threadCount = {1, 2};
  std::vector<bool> singleSubmit = {false, true};
  std::vector<bool> overlapEvents = {true, false};
};

// DeepSpeed's sweep file: lists per knob (block sizes as "1M" strings or numbers; io_parallel is
// thread_count, sequential_requests the opposite of overlap_events). Unknown keys are errors.
Sweep readSweep(const std::string& path) {
  const Json j = ds::parseJsonText(ds::readWholeFile(path, "sweep config", 1 << 20), path);
  if (!j.is_object()) throw ds::Error(path + ": expected a JSON object of knob lists");
  Sweep s;
  auto ints = [&](const std::string& key, const Json& v, bool sizes) {
    if (!v.is_array() || v.empty()) throw ds::Error(path + ": " + key + ": expected a non-empty list");
    std::vector<int64_t> out;
    for (const Json& x : v) {
      if (sizes && x.is_string())
        out.push_back(static_cast<int64_t>(ds::parseByteSize(path + ": " + key, x)));
      else if (x.is_number_integer() && x.get<int64_t>() > 0) out.push_back(x.get<int64_t>());
      else throw ds::Error(path + ": " + key + ": expected positive whole numbers, got " + x.dump());
    }
    return out;
  };
  auto bools = [&](const std::string& key, const Json& v, bool negate) {
    if (!v.is_array() || v.empty()) throw ds::Error(path + ": " + key + ": expected a non-empty list");
    std::vector<bool> out;
    for (const Json& x : v) {
      if (!x.is_boolean()) throw ds::Error(path + ": " + key + ": expected true/false, got " + x.dump());
      out.push_back(x.get<bool>() != negate);
    }
    return out;
  };
  for (auto& [key, value] : j.items()) {
    if (key == "block_size") s.blockSize = ints(key, value, true);
    else if (key == "queue_depth") s.queueDepth = ints(key, value, false);
    else if (key == "thread_count" || key == "io_parallel") s.threadCount = ints(key, value, false);
    else if (key == "single_submit") s.singleSubmit = bools(key, value, false);
    else if (key == "overlap_events") s.overlapEvents = bools(key, value, false);
    else if (key == "sequential_requests") s.overlapEvents = bools(key, value, true);
    else
      throw ds::Error(path + ": unknown key \"" + key +
                      "\" (block_size, queue_depth, thread_count/io_parallel, single_submit, "
                      "overlap_events/sequential_requests)");
  }
  return s;
}

// The test file's path, for the handlers below: Ctrl-C, SIGTERM or SIGHUP during the sweep
// remove it (it can be hundreds of MiB on the device being tuned). The engines and fio open it by
// name, so it cannot simply be unlinked once open.
char gTestFile[4096];

extern "C" void removeTestFileAndStop(int signal) {
  ::unlink(gTestFile);  // async-signal-safe, as are the two calls after it
  ::signal(signal, SIG_DFL);
  ::raise(signal);
}

void removeTestFileOnSignals(const std::string& file) {
  if (file.size() >= sizeof(gTestFile)) throw ds::Error(file + ": path too long");
  file.copy(gTestFile, file.size());
  struct sigaction action {};
  action.sa_handler = removeTestFileAndStop;
  sigemptyset(&action.sa_mask);
  for (const int signal : {SIGINT, SIGTERM, SIGHUP}) sigaction(signal, &action, nullptr);
}

std::string sizeText(int64_t bytes) {
  if (bytes % (1 << 20) == 0) return std::to_string(bytes >> 20) + "M";
  return std::to_string(bytes >> 10) + "K";
}

}  // namespace

int main(int argc, char** argv) {
  return ds::guardedMain("ds-nvme-tune", [&] {
    CLI::App app{"ds-nvme-tune: the fastest aio settings for a directory (DeepSpeed's ds_nvme_tune)"};
    std::string dir, sweepFile, ioSize = "256M";
    bool noRead = false, noWrite = false;
    int loops = 1;
    app.add_option("--nvme_dir", dir, "directory on the device to tune")->required();
    app.add_option("--io_size", ioSize, "bytes per measurement (e.g. 256M, 1G)");
    app.add_option("--sweep_config", sweepFile, "JSON lists of the knobs to try");
    app.add_flag("--no_read", noRead, "skip reads");
    app.add_flag("--no_write", noWrite, "skip writes");
    app.add_option("--loops", loops, "measurements per setting (the best counts)")
        ->check(CLI::Range(1, 1000));
    if (std::optional<int> status = ds::parseCommandLine(app, argc, argv)) return *status;
    if (noRead && noWrite) throw ds::Error("--no_read and --no_write leave nothing to measure");
    if (!std::filesystem::is_directory(dir)) throw ds::Error("--nvme_dir " + dir + ": not a directory");
    const size_t bytes = ds::parseByteSize("ds-nvme-tune --io_size", ioSize);
    if (bytes == 0)
      throw ds::Error(
          "ds-nvme-tune --io_size: 0 bytes measures nothing; give the bytes per "
          "measurement, e.g. --io_size 256M");
    const Sweep sweep = sweepFile.empty() ? Sweep{} : readSweep(sweepFile);
    std::vector<ds::runtime::AioConfig> settings;
    for (int64_t b : sweep.blockSize)
      for (int64_t q : sweep.queueDepth)
        for (int64_t t : sweep.threadCount)
          for (bool s : sweep.singleSubmit)
            for (bool o : sweep.overlapEvents) {
              ds::runtime::AioConfig c;
              c.blockSize = b;
              c.queueDepth = q;
              c.threadCount = t;
              c.singleSubmit = s;
              c.overlapEvents = o;
              c.validate();
              settings.push_back(c);
            }
    const size_t rounded = (bytes + 4095) / 4096 * 4096;
    ds::runtime::AlignedBuffer buffer(rounded);
    const std::string file = dir + "/ds-nvme-tune-" + std::to_string(getpid());
    struct Remove {
      std::string f;
      ~Remove() { std::filesystem::remove(f); }
    } remove{file};
    removeTestFileOnSignals(file);
    const bool built = ds::runtime::libaioBuilt();
    const bool direct = ds::runtime::directIoSupported(dir);
    const ds::runtime::AioBackend backend = ds::runtime::chooseAioBackend(built, direct);
    std::fprintf(stderr, "ds-nvme-tune: %zu settings x %s in %s (%s)\n", settings.size(),
                 noRead ? "write" : noWrite ? "read" : "read+write", dir.c_str(),
                 backend == ds::runtime::AioBackend::kLibaio ? "libaio, O_DIRECT"
                 : !built ? "pread/pwrite: this build has no libaio"
                          : "pread/pwrite: the directory refuses O_DIRECT");
    struct Best {
      double gbps = 0;
      ds::runtime::AioConfig config;
    } bestRead, bestWrite;
    const bool tty = isatty(STDERR_FILENO);
    for (size_t i = 0; i < settings.size(); ++i) {
      const auto& c = settings[i];
      auto engine = ds::runtime::makeAioEngine(c, backend);
      if (!std::filesystem::exists(file)) engine->write(file, buffer.data(), rounded, 0);
      auto measure = [&](bool write) {
        double best = 0;
        for (int l = 0; l < loops; ++l) {
          const auto start = Clock::now();
          if (write) engine->write(file, buffer.data(), rounded, 0);
          else engine->read(file, buffer.data(), rounded, 0);
          best = std::max(best, rounded / std::chrono::duration<double>(Clock::now() - start).count() / 1e9);
        }
        return best;
      };
      if (!noWrite) {
        const double w = measure(true);
        if (w > bestWrite.gbps) bestWrite = {w, c};
      }
      if (!noRead) {
        const double r = measure(false);
        if (r > bestRead.gbps) bestRead = {r, c};
      }
      const int filled = static_cast<int>(30 * (i + 1) / settings.size());
      std::string best;
      if (!noRead) best += "  best read " + std::to_string(bestRead.gbps).substr(0, 5) + " GB/s";
      if (!noWrite) best += "  best write " + std::to_string(bestWrite.gbps).substr(0, 5) + " GB/s";
      std::fprintf(stderr, "%s[%s%s] %zu/%zu%s%s", tty ? "\r" : "", std::string(filled, '#').c_str(),
                   std::string(30 - filled, '-').c_str(), i + 1, settings.size(), best.c_str(),
                   tty ? "" : "\n");
    }
    if (tty) std::fprintf(stderr, "\n");
    const bool fio = direct && ds::isExecutableOnPath("fio");
    auto report = [&](const char* what, const Best& b, bool write) {
      std::printf("best %s: %.2f GB/s with block_size %s, queue_depth %lld, thread_count %lld, "
                  "single_submit %s, overlap_events %s",
                  what, b.gbps, sizeText(b.config.blockSize).c_str(),
                  static_cast<long long>(b.config.queueDepth),
                  static_cast<long long>(b.config.threadCount),
                  b.config.singleSubmit ? "true" : "false", b.config.overlapEvents ? "true" : "false");
      if (fio) std::printf("; fio, same block and depth: %.2f GB/s", ds::fioBandwidthGBps(file, write, b.config.blockSize, b.config.queueDepth, rounded));
      std::printf("\n");
    };
    if (!noRead) report("read", bestRead, false);
    if (!noWrite) report("write", bestWrite, true);
    const Best& pick = noRead ? bestWrite : bestRead;  // DeepSpeed recommends by reads
    Json aio = {{"block_size", pick.config.blockSize},
                {"queue_depth", pick.config.queueDepth},
                {"thread_count", pick.config.threadCount},
                {"single_submit", pick.config.singleSubmit},
                {"overlap_events", pick.config.overlapEvents}};
    std::printf("put in the DeepSpeed config:\n%s\n", Json{{"aio", aio}}.dump(2).c_str());
    return 0;
  });
}
