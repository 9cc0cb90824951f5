// Output tagging through a pipe: fds 1 and 2 become the pipe's write end, a thread prefixes each
// complete line and writes it to a duplicate of the original stdout.
#include "worker/output_tagger.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include "runtime/common/rank_tag.h"

namespace ds::worker {
namespace {

int gConsole = -1;  // the original stdout
int gReadEnd = -1;
std::thread* gTagger = nullptr;
std::atomic<bool> gTaggerDone{false};

void writeAll(int fd, const std::string& text) {
  size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = write(fd, text.data() + written, text.size() - written);
    if (n <= 0) return;
    written += static_cast<size_t>(n);
  }
}

void tagLoop(int rank) {
  const std::string tag = ds::rankTag(rank);
  std::string pending;
  char buffer[65536];
  for (;;) {
    const ssize_t got = read(gReadEnd, buffer, sizeof(buffer));
    if (got <= 0) break;
    pending.append(buffer, static_cast<size_t>(got));
    std::string out;
    size_t start = 0, newline;
    while ((newline = pending.find('\n', start)) != std::string::npos) {
      out += tag + pending.substr(start, newline - start + 1);
      start = newline + 1;
    }
    pending.erase(0, start);
    writeAll(gConsole, out);
  }
  if (!pending.empty()) writeAll(gConsole, tag + pending + "\n");
  gTaggerDone = true;
}

}  // namespace

void startTaggingOutput(int rank) {
  int fds[2];
  if (gTagger != nullptr || pipe2(fds, O_CLOEXEC) != 0) return;
  std::fflush(stdout);
  std::fflush(stderr);
  gConsole = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
  gReadEnd = fds[0];
  dup2(fds[1], STDOUT_FILENO);  // dup2 clears O_CLOEXEC: children inherit the tagged fds
  dup2(fds[1], STDERR_FILENO);
  close(fds[1]);
  setvbuf(stdout, nullptr, _IOLBF, 0);
  gTagger = new std::thread(tagLoop, rank);
}

void finishTaggedOutput() {
  if (gTagger == nullptr) return;
  std::fflush(stdout);
  std::fflush(stderr);
  close(STDOUT_FILENO);
  close(STDERR_FILENO);
  // A child that still holds the write end keeps the pipe open: wait a little, then give up.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (!gTaggerDone && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  if (gTaggerDone)
    gTagger->join();
  else
    gTagger->detach();
  gTagger = nullptr;
}

}  // namespace ds::worker
