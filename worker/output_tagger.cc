// Output tagging through a pipe: fds 1 and 2 become the pipe's write end, a thread prefixes each
// complete line and writes it to a duplicate of the original stdout.
#include "worker/output_tagger.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <thread>

#include "contract/rank_tag.h"

namespace ds::worker {
namespace {

int gConsole = -1;  // the original stdout
int gReadEnd = -1;
std::thread* gTagger = nullptr;

std::atomic<bool> gStopRequested{false};
bool gConsoleStuck = false;  // tagger thread only

// Writes to the console in pieces of at most PIPE_BUF after poll() says there is room, so that a
// reader that stopped reading (ds-launch frozen) blocks this thread only while the worker runs:
// once the worker is leaving, output that cannot be delivered within half a second is dropped
// rather than holding the exit forever.
void writeAll(int fd, const std::string& text) {
  constexpr size_t kPiece = PIPE_BUF;
  auto stuckSince = std::chrono::steady_clock::time_point{};
  for (size_t written = 0; written < text.size() && !gConsoleStuck;) {
    pollfd p{fd, POLLOUT, 0};
    if (poll(&p, 1, 100) == 0) {
      if (!gStopRequested) continue;
      const auto now = std::chrono::steady_clock::now();
      if (stuckSince == std::chrono::steady_clock::time_point{}) stuckSince = now;
      if (now - stuckSince > std::chrono::milliseconds(500)) gConsoleStuck = true;
      continue;
    }
    const ssize_t n = write(fd, text.data() + written, std::min(kPiece, text.size() - written));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    written += static_cast<size_t>(n);
  }
}

// A line longer than this goes out in pieces of this size, each tagged: memory stays bounded
// however long a program's line is.
constexpr size_t kMaxLineBytes = 64 * 1024;

// Tags the complete lines of `pending` (and pieces of an over-long line) into `out`.
void cutLines(const std::string& tag, std::string& pending, std::string& out) {
  size_t start = 0, newline;
  while ((newline = pending.find('\n', start)) != std::string::npos) {
    for (; newline - start >= kMaxLineBytes; start += kMaxLineBytes)
      out += tag + pending.substr(start, kMaxLineBytes) + "\n";
    out += tag + pending.substr(start, newline - start + 1);
    start = newline + 1;
  }
  for (; pending.size() - start >= kMaxLineBytes; start += kMaxLineBytes)
    out += tag + pending.substr(start, kMaxLineBytes) + "\n";
  pending.erase(0, start);
}

// Runs until the pipe reaches end of file or, after finishTaggedOutput asked it to stop, until the
// pipe has been quiet for a moment (a child may still hold the write end) or a second has passed.
// Either way the unfinished last line is written, never dropped.
void tagLoop(int rank) {
  const std::string tag = ds::rankTag(rank);
  std::string pending;
  char buffer[65536];
  std::chrono::steady_clock::time_point stopDeadline{};
  for (;;) {
    if (gStopRequested && stopDeadline == std::chrono::steady_clock::time_point{})
      stopDeadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    if (stopDeadline != std::chrono::steady_clock::time_point{} &&
        std::chrono::steady_clock::now() > stopDeadline)
      break;
    pollfd p{gReadEnd, POLLIN, 0};
    const int ready = poll(&p, 1, 50);
    if (ready == 0) {
      if (gStopRequested) break;
      continue;
    }
    if (ready < 0) continue;
    const ssize_t got = read(gReadEnd, buffer, sizeof(buffer));
    if (got <= 0) break;
    pending.append(buffer, static_cast<size_t>(got));
    std::string out;
    cutLines(tag, pending, out);
    writeAll(gConsole, out);
  }
  if (!pending.empty()) writeAll(gConsole, tag + pending + "\n");
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

void finishTaggedOutput(const std::string& lastWords) {
  if (gTagger == nullptr) {
    if (!lastWords.empty()) std::fprintf(stderr, "%s\n", lastWords.c_str());
    return;
  }
  // First, so that a tagger blocked on a console nobody reads gives up and drains the pipe;
  // otherwise the flushes below could block forever.
  gStopRequested = true;
  if (!lastWords.empty()) std::fprintf(stderr, "%s\n", lastWords.c_str());
  std::fflush(stdout);
  std::fflush(stderr);
  close(STDOUT_FILENO);
  close(STDERR_FILENO);
  // A child that still holds the write end keeps the pipe open: the tagger then stops on its own
  // once the pipe is quiet (at most about a second), after writing what it has.
  gTagger->join();
  gTagger = nullptr;
}

}  // namespace ds::worker
