// ProcessPump's pipes (async reads cut into lines, bounded in length) and its reaper (SIGCHLD,
// waitpid), both driven by one io_context that poll() runs for a bounded time.
#include "launcher/process_pump.h"

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

namespace ds::launcher {
namespace {

// Output lines longer than this are cut into pieces, so memory is bounded whatever a rank prints.
constexpr size_t kMaxLineBytes = 1 << 20;
constexpr size_t kReadChunk = 16384;  // per process and read
constexpr auto kTick = std::chrono::milliseconds(50);

struct ProcessIo {
  std::string pending;                                          // bytes after the last newline
  std::unique_ptr<boost::asio::posix::stream_descriptor> pipe;  // owns the output fd while open
  std::vector<char> chunk;
  bool open = true;
};

}  // namespace

struct ProcessPump::Impl {
  Impl(ProcessPump& pump, std::vector<SpawnedProcess> processes, LineHandler onLine,
       FlushHandler onFlush)
      : pump(pump),
        processes(std::move(processes)),
        onLine(std::move(onLine)),
        onFlush(std::move(onFlush)),
        io(this->processes.size()),
        exits(this->processes.size()),
        tick(loop),
        childExits(loop, SIGCHLD) {}

  ProcessPump& pump;
  std::vector<SpawnedProcess> processes;
  LineHandler onLine;
  FlushHandler onFlush;
  boost::asio::io_context loop;
  std::vector<ProcessIo> io;
  std::vector<ProcessExit> exits;
  boost::asio::steady_timer tick;
  boost::asio::signal_set childExits;

  void closePipe(size_t p) {
    if (!io[p].open) return;
    if (!io[p].pending.empty()) onLine(p, io[p].pending);
    io[p].pending.clear();
    boost::system::error_code ignored;
    io[p].pipe->close(ignored);
    io[p].open = false;
    onFlush(p);
  }

  // What was read reaches its handler now, not when a buffer fills: logs are followed live
  // (tail -f, CI) and must survive ds-launch being killed.
  void readOutput(size_t p) {
    io[p].pipe->async_read_some(
        boost::asio::buffer(io[p].chunk),
        [this, p](const boost::system::error_code& error, size_t got) {
          if (error == boost::asio::error::operation_aborted) return;  // closed by us
          if (got > 0) {
            std::string& pending = io[p].pending;
            pending.append(io[p].chunk.data(), got);
            size_t start = 0, newline;
            while ((newline = pending.find('\n', start)) != std::string::npos) {
              onLine(p, pending.substr(start, newline - start));
              start = newline + 1;
            }
            // Workers cut long lines themselves; this bounds what other programs (ssh, mpirun)
            // send.
            for (; pending.size() - start >= kMaxLineBytes; start += kMaxLineBytes)
              onLine(p, pending.substr(start, kMaxLineBytes));
            pending.erase(0, start);
            onFlush(p);
          }
          if (error) return closePipe(p);  // end of file: the process and its children are gone
          readOutput(p);
        });
  }

  void reap(bool block) {
    for (size_t p = 0; p < processes.size(); ++p) {
      if (exits[p].exited) continue;
      int status = 0;
      if (waitpid(processes[p].pid, &status, block ? 0 : WNOHANG) != processes[p].pid) continue;
      exits[p].exited = true;
      exits[p].exitedAt = std::chrono::steady_clock::now();
      if (WIFSIGNALED(status)) exits[p].signal = WTERMSIG(status);
      exits[p].status = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
      --pump.running_;
    }
  }

  void awaitChildExit() {
    childExits.async_wait([this](const boost::system::error_code& error, int) {
      if (error) return;
      reap(false);
      loop.stop();
      awaitChildExit();
    });
  }

  void poll(std::chrono::milliseconds timeout) {
    tick.expires_after(timeout);
    tick.async_wait([this](const boost::system::error_code& error) {
      if (!error) loop.stop();
    });
    loop.restart();
    loop.run();
    reap(false);
  }
};

ProcessPump::ProcessPump(std::vector<SpawnedProcess> processes, LineHandler onLine,
                         FlushHandler onFlush)
    : impl_(std::make_unique<Impl>(*this, std::move(processes), std::move(onLine),
                                   std::move(onFlush))),
      running_(impl_->processes.size()) {
  for (size_t p = 0; p < impl_->processes.size(); ++p) {
    impl_->io[p].pipe = std::make_unique<boost::asio::posix::stream_descriptor>(
        impl_->loop, impl_->processes[p].outputFd);
    impl_->io[p].chunk.resize(kReadChunk);
    impl_->readOutput(p);
  }
  impl_->awaitChildExit();
  impl_->reap(false);  // children that exited before the handler was there
}

ProcessPump::~ProcessPump() = default;

void ProcessPump::poll(std::chrono::milliseconds timeout) { impl_->poll(timeout); }

const ProcessExit& ProcessPump::exit(size_t p) const { return impl_->exits[p]; }

void ProcessPump::terminate(std::chrono::milliseconds grace) {
  if (running_ > 0) {
    for (const auto& process : impl_->processes) ::kill(-process.pid, SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + grace;
    while (running_ > 0 && std::chrono::steady_clock::now() < deadline) poll(kTick);
  }
  for (const auto& process : impl_->processes) killProcessGroup(process.pid);
  impl_->reap(true);
  const auto drainDeadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (std::chrono::steady_clock::now() < drainDeadline &&
         std::any_of(impl_->io.begin(), impl_->io.end(), [](const ProcessIo& x) { return x.open; }))
    poll(kTick);
  for (size_t p = 0; p < impl_->processes.size(); ++p) impl_->closePipe(p);
}

}  // namespace ds::launcher
