// Engine checkpoints. Layout of dir/tag/:
//   manifest.json      format version, world size, stage, partitions, steps, config hash, model
//                      table, optimizer / scheduler / loss-scaler state, and per shard file its
//                      size and CRC32C checksum
//   shard_NNNNN.bin    one per partition (one in all at stage 0): the fp32 master shard followed
//                      by each optimizer state array over the same shard, back to back
// Written under dir/.tmp-tag and swapped into place by rank 0 once every rank has written and
// synced its file. Loading reads, from every old shard, the parts of its slices that overlap this
// rank's new slices, so any world size and any stage can load it.
#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "runtime/checkpoint/checkpoint_files.h"
#include "runtime/checkpoint/manifest.h"
#include "runtime/engine/engine.h"

namespace ds::runtime {
namespace {

namespace fs = std::filesystem;

void checkTag(const std::string& tag) {
  if (tag.empty() || tag == "latest" || tag.front() == '.' ||
      tag.find_first_of("/\\") != std::string::npos)
    throw Error("checkpoint tag \"" + tag +
                "\": expected a plain name (no '/', not empty, not \"latest\", not starting with "
                "'.'), e.g. \"global_step100\"");
}

// Runs `step`, turning its exception into the message failTogether() shares.
template <typename Step>
std::string problemOf(Step&& step) {
  try {
    step();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// 64-bit values through an fp32 all-gather: the bits are copied, never computed on.
struct FileRecord {
  uint64_t bytes, checksum;
};

}  // namespace

void Engine::verifyShardFiles(const std::string& root, const std::vector<ManifestFile>& files,
                              size_t arrays) {
  // Each file is checksummed by one rank (file q by rank q mod N), not by all of them; the first
  // failure's message goes to every rank so each one fails naming the file.
  std::string problem;
  for (size_t q = 0; q < files.size(); ++q) {
    if (static_cast<int>(q % comm_.size()) != comm_.rank() || !problem.empty()) continue;
    try {
      const std::string path = (fs::path(root) / files[q].name).string();
      const uint64_t bytes = files[q].bytes;
      const PartitionLayout old(specs_, static_cast<int>(files.size()), static_cast<int>(q));
      if (bytes != arrays * old.shardSize() * sizeof(float))
        throw Error(path + ": the manifest lists " + std::to_string(bytes) + " bytes, expected " +
                    std::to_string(arrays) + " arrays of " + std::to_string(old.shardSize()) +
                    " fp32 values");
      verifyCheckpointFile(path, bytes, files[q].checksum);
    } catch (const std::exception& e) {
      problem = e.what();
    }
  }
  failTogether(problem);
}

void Engine::failTogether(const std::string& problem) {
  // A rank that failed alone would leave the others waiting in the next collective until its
  // timeout; instead every rank learns every message and all throw the first one.
  constexpr size_t kMessageBytes = 512;
  std::vector<char> mine(kMessageBytes, 0), all(kMessageBytes * comm_.size());
  problem.copy(mine.data(), kMessageBytes - 1);
  queue_->run(
      [&] { comm_.allGather(mine.data(), all.data(), kMessageBytes / sizeof(float), DType::F32); });
  for (int r = 0; r < comm_.size(); ++r)
    if (all[r * kMessageBytes] != 0) throw Error(std::string(all.data() + r * kMessageBytes));
}

// Offloaded state is brought in for the checkpoint and swapped out again after, whether the save
// or load succeeded or not.
template <class Body>
auto Engine::withStateResident(Body body) {
  zero_->bringStateIn();
  try {
    auto result = body();
    zero_->sendStateOut();
    queue_->waitIdle();  // stage 3's persistent layers are gathered
    return result;
  } catch (...) {
    try {
      zero_->sendStateOut();
    } catch (...) {  // the first error is the one to report
    }
    throw;
  }
}

void Engine::saveCheckpoint(const std::string& dir, const std::string& tag) {
  withStateResident([&] {
    saveCheckpointResident(dir, tag);
    return 0;
  });
}

std::string Engine::loadCheckpoint(const std::string& dir, const std::string& tag,
                                   CheckpointLoadScope scope) {
  return withStateResident([&] { return loadCheckpointResident(dir, tag, scope); });
}

size_t Engine::optimizerSwapBytes() const { return zero_->optimizerStates().fileBytes(); }

size_t Engine::parameterSwapBytes() const { return zero_->parameterSwapBytes(); }

Engine::SwapTraffic Engine::optimizerSwapTraffic() const {
  const OptimizerStateHome::Traffic t = zero_->optimizerStates().traffic();
  return {t.read, t.written};
}

std::string Engine::optimizerSwapEngine() const { return zero_->optimizerStates().engineName(); }

void Engine::saveCheckpointResident(const std::string& dir, const std::string& tag) {
  checkTag(tag);
  queue_->run([] {});  // nothing of a previous step may still be writing the shards
  const std::string staging = (fs::path(dir) / (".tmp-" + tag)).string();
  const int rank = comm_.rank(), world = comm_.size();
  const int partitions = zero_->shardLayout().parts();
  std::string problem;
  if (rank == 0)
    problem = problemOf([&] {
      std::error_code ec;
      fs::create_directories(dir, ec);
      fs::remove_all(staging, ec);  // a crashed earlier save of this tag
      if (!fs::create_directories(staging, ec))
        throw Error(staging + ": cannot create checkpoint directory: " + ec.message());
    });
  // A failed save (a full disk on any rank, a peer lost) leaves nothing behind: each rank removes
  // its own shard, rank 0 the staging directory, after failTogether so no rank is still writing.
  // Otherwise a full disk would stay full, holding the half-written checkpoint.
  try {
    failTogether(problem);  // also: the directory exists for everyone now

    FileRecord mine{0, 0};
    const auto arrays = groups_.front().optimizer->stateArrays();
    problem = problemOf([&] {
      if (rank >= partitions) return;
      const size_t shard = zero_->shardLayout().shardSize();
      std::vector<std::pair<const void*, size_t>> pieces = {
          {zero_->masterData(), shard * sizeof(float)}};
      // Each state array over the whole shard: the sub-groups' pieces are consecutive runs of it.
      for (size_t a = 0; a < arrays.size(); ++a)
        for (const SubGroup& group : groups_) {
          const auto piece = group.optimizer->stateArrays()[a];
          pieces.push_back({piece.data, piece.count * sizeof(float)});
        }
      const WrittenFile written =
          writeFileSynced((fs::path(staging) / shardFileName(rank)).string(), pieces);
      mine = {written.bytes, written.checksum};
    });
    failTogether(problem);
    std::vector<FileRecord> records(world);
    queue_->run([&] {
      comm_.allGather(&mine, records.data(), sizeof(FileRecord) / sizeof(float), DType::F32);
    });

    problem = problemOf([&] {
      if (rank != 0) return;
      CheckpointManifest m;
      m.worldSize = world;
      m.zeroStage = zero_->stage();
      m.partitions = partitions;
      m.modelDtype = dtypeName(modelType_);
      m.configHash = config_.configHash;
      m.globalSteps = globalSteps_;
      m.skippedSteps = skippedSteps_;
      m.microSteps = microSteps_;
      m.lastGradNorm = lastGradNorm_;
      m.parameters = count_;
      for (const auto& s : specs_) m.tensors.push_back({s.name, s.numel});
      m.optimizerName = groups_.front().optimizer->name();
      m.optimizerSteps = groups_.front().optimizer->steps();
      for (const auto& a : arrays) m.optimizerArrays.push_back(a.name);
      const LossScaler::State s = scaler_.state();
      m.lossScale = s.scale;
      m.lossScalerIteration = s.iteration;
      m.lastOverflowIteration = s.lastOverflowIteration;
      m.hysteresis = s.hysteresis;
      if (scheduler_) m.lrLastBatchIteration = scheduler_->lastBatchIteration();
      for (int q = 0; q < partitions; ++q)
        m.files.push_back(
            {shardFileName(q), records[q].bytes, static_cast<uint32_t>(records[q].checksum)});
      const std::string text = manifestText(m);
      writeFileSynced((fs::path(staging) / "manifest.json").string(), {{text.data(), text.size()}});
      publishCheckpointDirectory(staging, dir, tag);
    });
    // Nobody returns (and perhaps loads or exits) before the checkpoint is in place, and a failure
    // to publish fails every rank.
    failTogether(problem);
  } catch (...) {
    std::error_code ignored;
    fs::remove(fs::path(staging) / shardFileName(rank), ignored);
    if (rank == 0) fs::remove_all(staging, ignored);
    throw;
  }
}

std::string Engine::loadCheckpointResident(const std::string& dir, const std::string& requestedTag,
                                           CheckpointLoadScope scope) {
  const std::string tag = requestedTag.empty() ? readLatestTag(dir) : requestedTag;
  checkTag(tag);
  queue_->run([] {});
  const fs::path root = fs::path(dir) / tag;
  const std::string manifestPath = (root / "manifest.json").string();
  const CheckpointManifest m = readManifest(manifestPath);
  const auto& tensors = m.tensors;
  if (tensors.size() != specs_.size())
    throw Error(manifestPath + ": the checkpoint has " + std::to_string(tensors.size()) +
                " parameter tensors, this model " + std::to_string(specs_.size()));
  for (size_t t = 0; t < specs_.size(); ++t)
    if (tensors[t].name != specs_[t].name || tensors[t].numel != specs_[t].numel)
      throw Error(manifestPath + ": tensor " + std::to_string(t) + " is \"" + tensors[t].name +
                  "\" with " + std::to_string(tensors[t].numel) + " elements, this model has \"" +
                  specs_[t].name + "\" with " + std::to_string(specs_[t].numel) + " elements");
  Optimizer& first = *groups_.front().optimizer;
  const size_t nStates = first.stateArrays().size();
  if (scope.optimizerStates &&
      (m.optimizerName != first.name() || m.optimizerArrays.size() != nStates))
    throw Error(manifestPath + ": saved with optimizer \"" + m.optimizerName +
                "\", this run uses \"" + first.name() + "\"");

  // Where tensor t's slice of array a (0: master, then the optimizer's arrays) lives here.
  std::vector<std::vector<OptimizerStateArray>> groupArrays;
  for (const SubGroup& group : groups_) groupArrays.push_back(group.optimizer->stateArrays());
  std::vector<size_t> groupOf(specs_.size());
  for (size_t g = 0; g < groups_.size(); ++g)
    for (size_t t = groups_[g].t0; t < groups_[g].t1; ++t) groupOf[t] = g;
  auto destination = [&](size_t a, size_t t) -> float* {
    const size_t offset = zero_->shardLayout().tensor(t).shardOffset;
    if (a == 0) return zero_->masterData() + offset;
    const size_t g = groupOf[t];
    return groupArrays[g][a - 1].data + (offset - zero_->shardLayout().shardBegin(groups_[g].t0));
  };

  // Every old shard file is verified whole, then only the pieces of the old slices that overlap
  // this rank's new slices are read: any world size and stage, memory bounded by the own shard.
  const int oldParts = static_cast<int>(m.partitions);
  const auto& files = m.files;
  const size_t nArrays = 1 + m.optimizerArrays.size();         // in the files
  const size_t nLoaded = scope.optimizerStates ? nArrays : 1;  // master weights first
  const int newPart = zero_->shardLayout().parts() == 1 ? 0 : zero_->shardLayout().rank();
  for (size_t a = 0; a < nLoaded; ++a)  // padding of the new slices: zero
    for (size_t t = 0; t < specs_.size(); ++t) {
      const TensorPlacement& p = zero_->shardLayout().tensor(t);
      const size_t valid = std::min(p.slice, p.numel - std::min(p.numel, newPart * p.slice));
      std::fill(destination(a, t) + valid, destination(a, t) + p.slice, 0.0f);
    }
  verifyShardFiles(root.string(), files, nArrays);
  for (int q = 0; q < oldParts; ++q) {
    const PartitionLayout old(specs_, oldParts, q);
    const std::string path = (root / files[q].name).string();
    CheckpointReader reader(path);
    for (size_t t = 0; t < specs_.size(); ++t) {
      const TensorPlacement& was = old.tensor(t);
      const TensorPlacement& now = zero_->shardLayout().tensor(t);
      const size_t lo = std::max(q * was.slice, newPart * now.slice);
      const size_t hi = std::min({(q + 1) * was.slice, (newPart + 1) * now.slice, was.numel});
      if (lo >= hi) continue;
      for (size_t a = 0; a < nLoaded; ++a)
        reader.read((a * old.shardSize() + was.shardOffset + lo - q * was.slice) * sizeof(float),
                    (hi - lo) * sizeof(float), destination(a, t) + (lo - newPart * now.slice));
    }
  }
  if (scope.optimizerStates)
    for (const SubGroup& group : groups_) group.optimizer->setSteps(m.optimizerSteps);

  if (scope.trainingState) {
    globalSteps_ = m.globalSteps;
    skippedSteps_ = m.skippedSteps;
    microSteps_ = m.microSteps;
    lastGradNorm_ = m.lastGradNorm;
    scaler_.restore({m.lossScale, m.lossScalerIteration, m.lastOverflowIteration, m.hysteresis});
    if (scheduler_ && m.lrLastBatchIteration) {
      scheduler_->setLastBatchIteration(*m.lrLastBatchIteration);
      lr_ = scheduler_->lr();
    }
  }
  // The working copy follows the master: converted, gathered or re-sliced as the stage needs.
  zero_->publishParameters(false);
  zero_->zeroGradients();
  return tag;
}

}  // namespace ds::runtime
