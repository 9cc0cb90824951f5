// The on-disk side of checkpoints: shard files written with a running checksum and fsync, a
// checksum-verified reader that names the bad file, and the atomic publish of a finished
// directory (swap into place, then `latest`). A crash at any moment leaves the previous
// checkpoint of that tag, and `latest`, loadable. Knows nothing of engines or ranks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/fnv1a.h"
#include "common/files.h"

namespace ds::runtime {

struct WrittenFile {
  uint64_t bytes = 0;
  uint32_t checksum = 0;  // CRC32C of the content
};

// Writes the pieces back to back to `path` (created or truncated), fsyncs, and returns the size
// and checksum. Errors name the path.
WrittenFile writeFileSynced(const std::string& path,
                            const std::vector<std::pair<const void*, size_t>>& pieces);

// A checkpoint file written in pieces at any offsets (a shard streamed sub-group by sub-group,
// each array's piece at its place), each piece checksummed while in memory: finish() checks that
// the pieces tile the file, fsyncs, and returns the size and the whole content's checksum combined
// from the pieces' (crc32cCombine), so nothing is read back. Errors name the path.
class ShardFileWriter {
 public:
  explicit ShardFileWriter(const std::string& path);
  ~ShardFileWriter();  // closes an unfinished file; the caller removes it
  ShardFileWriter(const ShardFileWriter&) = delete;
  ShardFileWriter& operator=(const ShardFileWriter&) = delete;
  void writeAt(uint64_t offset, const void* data, size_t bytes);
  WrittenFile finish();

 private:
  struct Piece {
    uint64_t offset, bytes;
    uint32_t checksum;
  };
  std::string path_;
  int fd_ = -1;
  std::vector<Piece> pieces_;
};

// Checks `path`'s size and checksum against the manifest's, streaming (constant memory); a
// mismatch is an error naming the file and what differs (truncated, corrupted).
void verifyCheckpointFile(const std::string& path, uint64_t bytes, uint32_t checksum);

// Reads byte ranges of one checkpoint file (a regular file only); errors name the file.
class CheckpointReader {
 public:
  explicit CheckpointReader(const std::string& path) : file_(path, "checkpoint file") {}
  uint64_t size() const { return file_.size(); }
  void read(uint64_t offset, size_t bytes, void* out) { file_.readAt(offset, bytes, out); }

 private:
  RegularFile file_;
};

// Makes `staging` the directory dir/tag atomically (an existing dir/tag is swapped out and then
// removed) and points dir/latest at tag (written to a temporary name, fsynced, renamed).
void publishCheckpointDirectory(const std::string& staging, const std::string& dir,
                                const std::string& tag);

// The tag dir/latest names; an error naming the file when it is missing, empty, larger than a
// tag file can be (4 KiB) or not a regular file.
std::string readLatestTag(const std::string& dir);

// Where the part of pipeline stage `stage` and model rank `modelRank` of a checkpoint lives under
// its directory `root`: the first part (and a job without model or pipeline parallelism) at the
// top, every other in root/pipe_SS-model_MM.
std::string gridCheckpointDir(const std::string& root, int64_t stage, int64_t modelRank);
// Expert parallelism: the experts' part of expert-parallel rank `expertRank` beside a model part
// (gridDir/experts_NN).
std::string expertCheckpointDir(const std::string& gridDir, int64_t expertRank);

// Writes text to path through a temporary file + fsync + rename.
void writeTextAtomically(const std::string& path, const std::string& text);

}  // namespace ds::runtime
