// The checkpoint manifest (dir/tag/manifest.json): what a checkpoint holds, typed, written with a
// checksum of its own and read as untrusted input. Every field is checked for presence, type and
// range, shard files may only have the names the saver writes, and any problem is an error that
// names the manifest and the key. Knows nothing of engines; the engine fills and consumes it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/slice_map.h"

namespace ds::runtime {

struct ManifestTensor {
  std::string name;
  uint64_t numel = 0;
  // A model-parallel slice: where its elements sit in the full tensor (absent: the whole tensor).
  std::optional<SliceMap> slice;
};

// Where a checkpoint of one pipeline stage's model slice sits on the grid that saved it (absent
// for a job without model or pipeline parallelism).
struct ManifestGrid {
  int64_t pipe = 1, model = 1;  // the grid's sizes (its data size is the manifest's world size)
  int64_t stage = 0, modelRank = 0;
};

// A model with MoE experts: the job's expert-parallel size (1 without expert parallelism), in
// every part of its checkpoint, and in the parts that hold the experts (one per expert-parallel
// rank beside each model part, written by its expert-data group) that part's expert-parallel
// rank.
struct ManifestExperts {
  int64_t parallel = 1;
  int64_t rank = -1;  // -1: the model's part, not an experts' one
};

struct ManifestFile {
  std::string name;  // always shardFileName(its index)
  uint64_t bytes = 0;
  uint32_t checksum = 0;  // CRC32C of the file ("crc32c:%08x" in the JSON)
};

struct CheckpointManifest {
  // The run that saved it: drawn at a job's first save and kept across resumes, so that parts of
  // different runs never pass for one checkpoint (32 lower-case hex digits; empty in format 2).
  std::string runId;
  // The model's architecture as Model::architecture() writes it (empty in format 2).
  std::string architecture;
  int64_t worldSize = 1;
  int64_t zeroStage = 0;
  int64_t partitions = 1;  // 1 (stage 0) or worldSize (an experts' part: its group's size)
  std::string modelDtype;
  std::string configHash;
  int64_t globalSteps = 0, skippedSteps = 0, microSteps = 0;
  double lastGradNorm = 0;
  uint64_t parameters = 0;
  std::vector<ManifestTensor> tensors;
  std::string optimizerName;
  int64_t optimizerSteps = 0;
  std::vector<std::string> optimizerArrays;
  // Optimizer::tensorScalars of the part's optimizers in order (1-bit LAMB's; empty for others).
  std::vector<double> optimizerTensorScalars;
  double lossScale = 1;
  int64_t lossScalerIteration = 0, lastOverflowIteration = 0, hysteresis = 0;
  std::optional<int64_t> lrLastBatchIteration;  // absent without a scheduler
  std::vector<ManifestFile> files;
  std::optional<ManifestGrid> grid;
  std::optional<ManifestExperts> experts;  // absent for a model without experts
};

// The most partitions (and saving ranks) a manifest may list: ds-launch's most ranks per job.
inline constexpr int64_t kMaxCheckpointPartitions = 65536;

// "shard_00003.bin": the only shard file names a manifest may list.
std::string shardFileName(int partition);

// The manifest as JSON text, with its own checksum ("manifest_checksum": "crc32c:%08x").
std::string manifestText(const CheckpointManifest& manifest);

// Parses and validates manifest text; `path` names it in every message. A checksum named with
// another algorithm is refused, and so is a manifest of the FNV-1a format (version 1) that
// earlier builds wrote, with a message saying to re-save it with the build that wrote it. Format 2
// (no run id or architecture) is still read; this build writes format 3.
CheckpointManifest parseManifest(std::string_view text, const std::string& path);

// What makes `part` another save than `top` when both claim to be parts of one checkpoint (the
// run, the architecture, the step counters and the training state every part records alike),
// as "global_steps 2, the top part's 4"; empty when nothing differs.
std::string partDifference(const CheckpointManifest& top, const CheckpointManifest& part);

// Where two architecture lines (Model::architecture(): "key=value" words) differ, as
// "activation relu, the checkpoint's gelu": the first differing key, or both lines in full when
// they do not share their keys.
std::string architectureDifference(const std::string& saved, const std::string& current,
                                  const std::string& savedName = "the checkpoint's");

// A fresh run id: 128 random bits as 32 lower-case hex digits.
std::string newRunId();

// Reads (a regular file of at most 16 MiB) and parses `path`.
CheckpointManifest readManifest(const std::string& path);

}  // namespace ds::runtime
