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

#include "bench/fio_baseline.h"
#include "common/command_line.h"
#include "common/error.h"
#include "common/files.h"
#include "common/guarded_main.h"
#include "common/json_text.h"
#include "contract/job_args.h"
#include "runtime/offload/aio_engine.h"

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
    if (!v.is_array() || v.empty())
      throw ds::Error(path + ": " + key + ": expected a non-empty list");
    std::vector<int64_t> out;
    for (const Json& x : v) {
      if (sizes && x.is_string())
        out.push_back(static_cast<int64_t>(ds::parseByteSize(path + ": " + key, x)));
      else if (x.is_number_integer() && x.get<int64_t>() > 0)
        out.push_back(x.get<int64_t>());
      else
        throw ds::Error(path + ": " + key + ": expected positive whole numbers, got " + x.dump());
    }
    return out;
  };
  auto bools = [&](const std::string& key, const Json& v, bool negate) {
    if (!v.is_array() || v.empty())
      throw ds::Error(path + ": " + key + ": expected a non-empty list");
    std::vector<bool> out;
    for (const Json& x : v) {
      if (!x.is_boolean())
        throw ds::Error(path + ": " + key + ": expected true/false, got " + x.dump());
      out.push_back(x.get<bool>() != negate);
    }
    return out;
  };
  for (auto& [key, value] : j.items()) {
    if (key == "block_size")
      s.blockSize = ints(key, value, true);
    else if (key == "queue_depth")
      s.queueDepth = ints(key, value, false);
    else if (key == "thread_count" || key == "io_parallel")
      s.threadCount = ints(key, value, false);
    else if (key == "single_submit")
      s.singleSubmit = bools(key, value, false);
    else if (key == "overlap_events")
      s.overlapEvents = bools(key, value, false);
    else if (key == "sequential_requests")
      s.overlapEvents = bools(key, value, true);
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

struct Options {
  std::string dir, sweepFile, ioSize = "256M";
  bool noRead = false, noWrite = false;
  int loops = 1;
};

void addOptions(CLI::App& app, Options& o) {
  app.add_option("--nvme_dir", o.dir, "directory on the device to tune")->required();
  app.add_option("--io_size", o.ioSize, "bytes per measurement (e.g. 256M, 1G)");
  app.add_option("--sweep_config", o.sweepFile, "JSON lists of the knobs to try");
  app.add_flag("--no_read", o.noRead, "skip reads");
  app.add_flag("--no_write", o.noWrite, "skip writes");
  app.add_option("--loops", o.loops, "measurements per setting (the best counts)")
      ->check(CLI::Range(1, 1000));
}

// The bytes per measurement, once the options are known to leave something to measure.
size_t checkOptions(const Options& o) {
  if (o.noRead && o.noWrite) throw ds::Error("--no_read and --no_write leave nothing to measure");
  if (!std::filesystem::is_directory(o.dir))
    throw ds::Error("--nvme_dir " + o.dir + ": not a directory");
  const size_t bytes = ds::parseByteSize("ds-nvme-tune --io_size", o.ioSize);
  if (bytes == 0)
    throw ds::Error(
        "ds-nvme-tune --io_size: 0 bytes measures nothing; give the bytes per "
        "measurement, e.g. --io_size 256M");
  return bytes;
}

// Every combination of the sweep's knobs, each one the engine accepts.
std::vector<ds::runtime::AioConfig> settingsOf(const Sweep& sweep) {
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
  return settings;
}

struct Best {
  double gbps = 0;
  ds::runtime::AioConfig config;
};

// What every measurement reads or writes: the whole of `file` from one aligned buffer.
struct TestFile {
  std::string path;
  ds::runtime::AlignedBuffer& buffer;
  size_t bytes;  // a whole number of 4 KiB blocks
};

double bestGBps(ds::runtime::AioEngine& engine, const TestFile& file, int loops, bool write) {
  double best = 0;
  for (int l = 0; l < loops; ++l) {
    const auto start = Clock::now();
    if (write)
      engine.write(file.path, file.buffer.data(), file.bytes, 0);
    else
      engine.read(file.path, file.buffer.data(), file.bytes, 0);
    best = std::max(best,
                    file.bytes / std::chrono::duration<double>(Clock::now() - start).count() / 1e9);
  }
  return best;
}

// A 30-character bar and the best figures so far: redrawn in place on a terminal, a line each
// otherwise.
void printProgress(size_t done, size_t total, const Best& bestRead, const Best& bestWrite,
                   const Options& o, bool tty) {
  const int filled = static_cast<int>(30 * done / total);
  std::string best;
  if (!o.noRead) best += "  best read " + std::to_string(bestRead.gbps).substr(0, 5) + " GB/s";
  if (!o.noWrite) best += "  best write " + std::to_string(bestWrite.gbps).substr(0, 5) + " GB/s";
  std::fprintf(stderr, "%s[%s%s] %zu/%zu%s%s", tty ? "\r" : "", std::string(filled, '#').c_str(),
               std::string(30 - filled, '-').c_str(), done, total, best.c_str(), tty ? "" : "\n");
}

void printBest(const char* what, const Best& b, bool write, bool fio, const TestFile& file) {
  std::printf(
      "best %s: %.2f GB/s with block_size %s, queue_depth %lld, thread_count %lld, "
      "single_submit %s, overlap_events %s",
      what, b.gbps, sizeText(b.config.blockSize).c_str(),
      static_cast<long long>(b.config.queueDepth), static_cast<long long>(b.config.threadCount),
      b.config.singleSubmit ? "true" : "false", b.config.overlapEvents ? "true" : "false");
  if (fio)
    std::printf("; fio, same block and depth: %.2f GB/s",
                ds::fioBandwidthGBps(file.path, write, b.config.blockSize, b.config.queueDepth,
                                     file.bytes));
  std::printf("\n");
}

void printAioBlock(const ds::runtime::AioConfig& config) {
  Json aio = {{"block_size", config.blockSize},
              {"queue_depth", config.queueDepth},
              {"thread_count", config.threadCount},
              {"single_submit", config.singleSubmit},
              {"overlap_events", config.overlapEvents}};
  std::printf("put in the DeepSpeed config:\n%s\n", Json{{"aio", aio}}.dump(2).c_str());
}

// Measures every setting on `file` (made by the first engine), then prints the best of each way
// and the `aio` block that reaches them.
void tune(const Options& o, const std::vector<ds::runtime::AioConfig>& settings,
          ds::runtime::AioBackend backend, bool direct, const TestFile& file) {
  Best bestRead, bestWrite;
  const bool tty = isatty(STDERR_FILENO);
  for (size_t i = 0; i < settings.size(); ++i) {
    const auto& c = settings[i];
    auto engine = ds::runtime::makeAioEngine(c, backend);
    if (!std::filesystem::exists(file.path))
      engine->write(file.path, file.buffer.data(), file.bytes, 0);
    if (!o.noWrite) {
      const double w = bestGBps(*engine, file, o.loops, true);
      if (w > bestWrite.gbps) bestWrite = {w, c};
    }
    if (!o.noRead) {
      const double r = bestGBps(*engine, file, o.loops, false);
      if (r > bestRead.gbps) bestRead = {r, c};
    }
    printProgress(i + 1, settings.size(), bestRead, bestWrite, o, tty);
  }
  if (tty) std::fprintf(stderr, "\n");
  const bool fio = direct && ds::isExecutableOnPath("fio");
  if (!o.noRead) printBest("read", bestRead, false, fio, file);
  if (!o.noWrite) printBest("write", bestWrite, true, fio, file);
  printAioBlock((o.noRead ? bestWrite : bestRead).config);  // DeepSpeed recommends by reads
}

}  // namespace

int main(int argc, char** argv) {
  return ds::guardedMain("ds-nvme-tune", [&] {
    CLI::App app{
        "ds-nvme-tune: the fastest aio settings for a directory (DeepSpeed's ds_nvme_tune)"};
    Options o;
    addOptions(app, o);
    if (std::optional<int> status = ds::parseCommandLine(app, argc, argv)) return *status;
    const size_t bytes = checkOptions(o);
    const Sweep sweep = o.sweepFile.empty() ? Sweep{} : readSweep(o.sweepFile);
    const std::vector<ds::runtime::AioConfig> settings = settingsOf(sweep);
    const size_t rounded = (bytes + 4095) / 4096 * 4096;
    ds::runtime::AlignedBuffer buffer(rounded);
    const std::string file = o.dir + "/ds-nvme-tune-" + std::to_string(getpid());
    struct Remove {
      std::string f;
      ~Remove() { std::filesystem::remove(f); }
    } remove{file};
    removeTestFileOnSignals(file);
    const bool built = ds::runtime::libaioBuilt();
    const bool direct = ds::runtime::directIoSupported(o.dir);
    const ds::runtime::AioBackend backend = ds::runtime::chooseAioBackend(built, direct);
    std::fprintf(stderr, "ds-nvme-tune: %zu settings x %s in %s (%s)\n", settings.size(),
                 o.noRead    ? "write"
                 : o.noWrite ? "read"
                             : "read+write",
                 o.dir.c_str(),
                 backend == ds::runtime::AioBackend::kLibaio ? "libaio, O_DIRECT"
                 : !built ? "pread/pwrite: this build has no libaio"
                          : "pread/pwrite: the directory refuses O_DIRECT");
    tune(o, settings, backend, direct, {file, buffer, rounded});
    return 0;
  });
}
