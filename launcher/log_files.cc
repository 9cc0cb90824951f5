// defaultLogDir and RankLogs (see the header). The checks matter most when ds-launch runs as
// root without a home directory: a shared $TMPDIR is where another user can plant a link.
#include "launcher/log_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <iostream>

#include "common/error.h"

namespace ds::launcher {
namespace {

std::string timeStamp(const char* format) {
  char stamp[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(stamp, sizeof(stamp), format, std::localtime(&now));
  return stamp;
}

// `path` as this user's private directory, created 0700 if missing; refused (naming the path
// and the fix) when it is a link, another user's, or writable by group or others.
std::string privateDirectory(const std::string& path) {
  const std::string fix =
      "; remove it, or pass --log_dir DIR (or set HOME or XDG_STATE_HOME) for the logs";
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST)
    throw Error(path + ": cannot create the log directory: " + std::strerror(errno) + fix);
  struct stat info {};
  if (::lstat(path.c_str(), &info) != 0)
    throw Error(path + ": cannot check the log directory: " + std::strerror(errno) + fix);
  std::string problem;
  if (S_ISLNK(info.st_mode))
    problem = "is a symbolic link";
  else if (!S_ISDIR(info.st_mode))
    problem = "is not a directory";
  else if (info.st_uid != ::geteuid())
    problem = "belongs to uid " + std::to_string(info.st_uid) + ", not to this user (uid " +
              std::to_string(::geteuid()) + ")";
  else if ((info.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    problem = "may be written by group or others (mode " + std::to_string((info.st_mode >> 6) & 7) +
              std::to_string((info.st_mode >> 3) & 7) + std::to_string(info.st_mode & 7) + ")";
  if (!problem.empty())
    throw Error(path + ": " + problem +
                ", so someone else may control the logs ds-launch would write there" + fix);
  return path;
}

// Opens `path` for writing as an empty regular file with one name, never through a link.
int openLogFile(const std::string& path) {
  const std::string fix = "; remove it or choose another --log_dir";
  // No O_TRUNC: the file is emptied only after it is known to be ours to empty.
  const int fd =
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
  if (fd < 0) {
    if (errno == ELOOP) throw Error(path + ": is a symbolic link, not a log file" + fix);
    throw Error(path + ": cannot write the log file: " + std::strerror(errno) + fix);
  }
  struct stat info {};
  std::string problem;
  if (::fstat(fd, &info) != 0)
    problem = std::string("cannot check the log file: ") + std::strerror(errno);
  else if (!S_ISREG(info.st_mode))
    problem = "is not a regular file";
  else if (info.st_nlink != 1)
    problem = "has " + std::to_string(info.st_nlink) + " names (a hard link), not a log file";
  else if (::ftruncate(fd, 0) != 0)
    problem = std::string("cannot empty the log file: ") + std::strerror(errno);
  if (!problem.empty()) {
    ::close(fd);
    throw Error(path + ": " + problem + fix);
  }
  const int flags = ::fcntl(fd, F_GETFL);
  ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

}  // namespace

std::string defaultLogDir() {
  const std::string run = timeStamp("%Y%m%d-%H%M%S") + "-" + std::to_string(::getpid());
  const char* state = std::getenv("XDG_STATE_HOME");
  const char* home = std::getenv("HOME");
  if (state != nullptr && state[0] == '/') return std::string(state) + "/ds-launch/" + run;
  if (home != nullptr && home[0] == '/')
    return std::string(home) + "/.local/state/ds-launch/" + run;
  const char* tmp = std::getenv("TMPDIR");
  const std::string base = std::string(tmp != nullptr && tmp[0] == '/' ? tmp : "/tmp") +
                           "/ds-launch-" + std::to_string(::geteuid());
  return privateDirectory(base) + "/" + run;
}

RankLogs::RankLogs(const std::string& logDir, const std::string& eachRankLogDir, size_t ranks) {
  for (const std::string& each : {logDir, eachRankLogDir}) {
    if (each.empty()) continue;
    if (std::filesystem::exists(each) && !std::filesystem::is_directory(each))
      throw Error(each + " should not be a file, it should be a directory.");
    std::error_code error;
    std::filesystem::create_directories(each, error);
    if (error)
      throw Error("unable to create directory " + each + " for each rank log: " + error.message());
  }
  const std::string& dir = eachRankLogDir.empty() ? logDir : eachRankLogDir;
  const std::string prefix = timeStamp("%Y%m%d%H%M%S");
  for (size_t r = 0; r < ranks; ++r)
    paths_.push_back(eachRankLogDir.empty()
                         ? dir + "/rank-" + std::to_string(r) + ".log"
                         : dir + "/" + prefix + "_rank" + std::to_string(r) + ".log");
  pending_.resize(ranks);
  try {
    for (const std::string& path : paths_) fds_.push_back(openLogFile(path));
  } catch (...) {
    for (const int fd : fds_) ::close(fd);
    throw;
  }
}

RankLogs::~RankLogs() {
  for (size_t r = 0; r < fds_.size(); ++r) {
    flush(r);
    ::close(fds_[r]);
  }
}

void RankLogs::write(size_t rank, const std::string& line) {
  pending_[rank] += line;
  pending_[rank] += '\n';
}

void RankLogs::flush(size_t rank) {
  std::string& text = pending_[rank];
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fds_[rank], text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // a full disk loses log lines, not the job
    done += static_cast<size_t>(n);
  }
  text.clear();
}

std::vector<std::string> keepMembershipLogs(const std::vector<std::string>& paths, uint64_t epoch) {
  namespace fs = std::filesystem;
  std::vector<std::string> kept;
  for (const std::string& path : paths) {
    const fs::path dir = fs::path(path).parent_path() / ("epoch-" + std::to_string(epoch));
    const fs::path target = dir / fs::path(path).filename();
    std::error_code error;
    fs::create_directories(dir, error);
    if (!error) fs::rename(path, target, error);
    if (error) {
      std::cerr << "ds-launch: warning: cannot keep " << path << " in " << dir.string() << ": "
                << error.message() << "; the next membership overwrites it\n";
      kept.push_back(path);
    } else {
      kept.push_back(target.string());
    }
  }
  return kept;
}

}  // namespace ds::launcher
