// deleteOldCheckpoints: see checkpoint_retention.h. Which directories count is decided by name and
// content only (never by time stamps), so any rank or a later run reaches the same verdict.
#include "runtime/checkpoint/checkpoint_retention.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <optional>
#include <system_error>

#include "common/error.h"
#include "runtime/checkpoint/checkpoint_files.h"

namespace ds::runtime {
namespace fs = std::filesystem;
namespace {

constexpr std::string_view kStepPrefix = "global_step";
constexpr std::string_view kDeletingPrefix = ".deleting-";

// N for a name written exactly as the trainers write it ("global_step" + std::to_string(N)).
std::optional<int64_t> stepOf(std::string_view name) {
  if (name.substr(0, kStepPrefix.size()) != kStepPrefix) return std::nullopt;
  const std::string_view digits = name.substr(kStepPrefix.size());
  int64_t step = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), step);
  if (ec != std::errc() || end != digits.data() + digits.size() || digits.empty() || step < 0 ||
      std::to_string(step) != digits)
    return std::nullopt;
  return step;
}

bool isCompleteCheckpoint(const fs::path& path) {
  std::error_code ec;
  return fs::is_directory(fs::symlink_status(path, ec)) &&
         fs::is_regular_file(fs::symlink_status(path / "manifest.json", ec));
}

void removeTree(const fs::path& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
  if (ec) throw Error(path.string() + ": cannot delete an old checkpoint: " + ec.message());
}

}  // namespace

std::vector<std::string> deleteOldCheckpoints(const std::string& dir, int64_t keep) {
  if (keep < 1) throw Error("keep-last-n-checkpoints: expected a count >= 1");
  std::error_code ec;
  if (!fs::exists(fs::path(dir) / "latest", ec)) return {};
  const std::string latest = readLatestTag(dir);

  std::vector<std::pair<int64_t, std::string>> others;  // complete checkpoints but latest's
  fs::directory_iterator listing(dir, ec);
  if (ec) throw Error(dir + ": cannot list the checkpoints: " + ec.message());
  for (const fs::directory_entry& entry : listing) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(kDeletingPrefix, 0) == 0 && stepOf(name.substr(kDeletingPrefix.size()))) {
      removeTree(entry.path());  // left by a deletion a crash interrupted
      continue;
    }
    const auto step = stepOf(name);
    if (step && name != latest && isCompleteCheckpoint(entry.path()))
      others.emplace_back(*step, name);
  }
  std::sort(others.begin(), others.end());                  // oldest first
  const size_t keepOthers = static_cast<size_t>(keep - 1);  // `latest`'s is one of the `keep`
  std::vector<std::string> deleted;
  for (size_t i = 0; i + keepOthers < others.size(); ++i) {
    const fs::path from = fs::path(dir) / others[i].second;
    const fs::path doomed = fs::path(dir) / (std::string(kDeletingPrefix) + others[i].second);
    removeTree(doomed);
    // The rename is the moment the checkpoint stops being one: nothing loads a half-deleted tree.
    fs::rename(from, doomed, ec);
    if (ec) throw Error(from.string() + ": cannot move an old checkpoint aside: " + ec.message());
    removeTree(doomed);
    deleted.push_back(others[i].second);
  }
  return deleted;
}

}  // namespace ds::runtime
