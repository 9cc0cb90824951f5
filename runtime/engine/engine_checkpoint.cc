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
#include <map>
#include <memory>

#include "common/error.h"
#include "runtime/checkpoint/checkpoint_files.h"
#include "runtime/checkpoint/manifest.h"
#include "runtime/engine/checkpoint_parts.h"
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

void Engine::verifyShardFiles(Communicator& group, const std::vector<ShardFileCheck>& checks) {
  // Each file is checksummed by one rank of the group (file k by rank k mod N), not by all of
  // them; the first failure's message goes to every rank so each one fails naming the file.
  std::string problem;
  for (size_t k = 0; k < checks.size(); ++k) {
    if (static_cast<int>(k % group.size()) != group.rank() || !problem.empty()) continue;
    problem = problemOf([&] {
      const ShardFileCheck& c = checks[k];
      if (c.file.bytes != c.expectedBytes)
        throw Error(c.path + ": the manifest lists " + std::to_string(c.file.bytes) +
                    " bytes, expected " + std::to_string(c.expectedBytes) + " (" +
                    std::to_string(c.expectedBytes / sizeof(float)) + " fp32 values)");
      verifyCheckpointFile(c.path, c.file.bytes, c.file.checksum);
    });
  }
  failTogether(problem);
}

void Engine::failTogether(const std::string& problem) {
  // A rank that failed alone would leave the others waiting in the next collective until its
  // timeout; instead every rank learns every message and all throw the first one.
  if (const std::string first = firstOnGrid(problem); !first.empty()) throw Error(first);
}

std::string Engine::firstOnGrid(const std::string& mine) {
  // The data group's first travels along the model and pipe axes, so every rank of the job ends
  // with the same text.
  constexpr size_t kMessageBytes = 512;
  std::string first = mine;
  for (Communicator* group : {&comm_, grid_.model, grid_.pipe}) {
    if (!group || group->size() == 1) continue;
    std::vector<char> own(kMessageBytes, 0), all(kMessageBytes * group->size());
    first.copy(own.data(), kMessageBytes - 1);
    queue_->run([&] {
      group->allGather(own.data(), all.data(), kMessageBytes / sizeof(float), DType::F32);
    });
    first.clear();
    for (int r = 0; r < group->size() && first.empty(); ++r)
      if (all[r * kMessageBytes] != 0) first = std::string(all.data() + r * kMessageBytes);
  }
  return first;
}

// Nothing is brought in whole for a checkpoint: the save and the load acquire the optimizer's
// sub-groups from their home one at a time (offload_optimizer nvme: through its slots), as a step
// does, and stage 3's offloaded parameters with them, layer by layer (read for a save only where
// they are the fp32 master; a load rewrites them), so a checkpoint holds no more than one group
// beyond the steady state. Whatever is still in at the end, or after a failure, is written out.
template <class Body>
auto Engine::withParametersWrittenBack(Body body) {
  try {
    auto result = body();
    for (Partition& part : parts_) part.zero->sendParametersAway();
    queue_->waitIdle();  // stage 3's persistent layers are gathered
    return result;
  } catch (...) {
    for (Partition& part : parts_) try {
        part.zero->sendParametersAway();
      } catch (...) {  // the first error is the one to report
      }
    throw;
  }
}

void Engine::saveCheckpoint(const std::string& dir, const std::string& tag) {
  withParametersWrittenBack([&] {
    saveCheckpointResident(dir, tag);
    return 0;
  });
}

std::string Engine::loadCheckpoint(const std::string& dir, const std::string& tag,
                                   CheckpointLoadScope scope) {
  return withParametersWrittenBack([&] { return loadCheckpointResident(dir, tag, scope); });
}

template <class Body>
void Engine::forEachStateGroup(Partition& part, ZeroStage::ShardUse use, Body body) {
  ZeroStage& zero = *part.zero;
  OptimizerStateHome& home = zero.optimizerStates();
  for (size_t g = 0; g < part.groups.size(); ++g) {
    const SubGroup& group = part.groups[g];
    const size_t begin = zero.shardLayout().shardBegin(group.t0);
    zero.beginGroup({group.t0, group.t1}, use);
    float* master = home.acquire(g, zero.masterData() + begin, *group.optimizer);
    try {
      body(g, master, group.optimizer->stateArrays());
    } catch (...) {
      home.release(g, *group.optimizer);
      home.endStep();
      throw;
    }
    home.release(g, *group.optimizer);
    zero.endGroup({group.t0, group.t1}, use);
  }
  home.endStep();  // the write-backs done, the next step's first group read ahead
}

size_t Engine::optimizerSwapBytes() const {
  size_t bytes = 0;
  for (const Partition& part : parts_) bytes += part.zero->optimizerStates().fileBytes();
  return bytes;
}

size_t Engine::parameterSwapBytes() const {
  size_t bytes = 0;
  for (const Partition& part : parts_) bytes += part.zero->parameterSwapBytes();
  return bytes;
}

// The model's partition's: the experts' (expert parallelism) are not in these counters.
ZeroStage::OffloadStats Engine::parameterOffloadStats() const {
  return dense().zero->offloadStats();
}

Engine::SwapTraffic Engine::optimizerSwapTraffic() const {
  SwapTraffic all;
  for (const Partition& part : parts_) {
    const OptimizerStateHome::Traffic t = part.zero->optimizerStates().traffic();
    all.read += t.read;
    all.written += t.written;
  }
  return all;
}

std::string Engine::optimizerSwapEngine() const {
  return dense().zero->optimizerStates().engineName();
}

std::string Engine::partitionDir(const Partition& part, const std::string& gridDir) const {
  return part.experts ? expertCheckpointDir(gridDir, grid_.experts ? grid_.experts->rank() : 0)
                      : gridDir;
}

void Engine::saveCheckpointResident(const std::string& dir, const std::string& tag) {
  checkTag(tag);
  queue_->run([] {});  // nothing of a previous step may still be writing the shards
  const std::string staging = (fs::path(dir) / (".tmp-" + tag)).string();
  const int rank = comm_.rank();
  const GridPlace place = gridPlace();
  // This (stage, model rank)'s own checkpoint: the grid's first at the top, the others beside it;
  // with expert parallelism each expert-parallel rank's experts in a part beside that.
  const std::string gridDir = gridCheckpointDir(staging, place.stage, place.modelRank);
  const bool gridRoot = rank == 0 && place.stage == 0 && place.modelRank == 0;
  if (runId_.empty())  // the job's first save: the grid's first rank draws the run's id
    runId_ = firstOnGrid(rank == 0 && place.stage == 0 && place.modelRank == 0 ? newRunId() : "");
  std::string problem;
  if (gridRoot)
    problem = problemOf([&] {
      std::error_code ec;
      fs::create_directories(dir, ec);
      fs::remove_all(staging, ec);  // a crashed earlier save of this tag
      if (!fs::create_directories(staging, ec))
        throw Error(staging + ": cannot create checkpoint directory: " + ec.message());
    });
  // A failed save (a full disk on any rank, a peer lost) leaves nothing behind: each rank removes
  // its own shards, rank 0 the staging directory, after failTogether so no rank is still writing.
  // Otherwise a full disk would stay full, holding the half-written checkpoint.
  try {
    failTogether(problem);  // also: the directory exists for everyone now
    for (const Partition& part : parts_) {  // the parts' directories, the model's first
      const std::string partDir = partitionDir(part, gridDir);
      if (part.comm->rank() == 0 && partDir != staging)
        problem = problemOf([&] {
          std::error_code ec;
          if (!fs::create_directory(partDir, ec))
            throw Error(partDir + ": cannot create checkpoint directory: " + ec.message());
        });
      failTogether(problem);
    }
    for (Partition& part : parts_) {
      const std::string partDir = partitionDir(part, gridDir);
      const int partRank = part.comm->rank(), partitions = part.zero->shardLayout().parts();
      FileRecord mine{0, 0};
      const auto arrays = part.groups.front().optimizer->stateArrays();
      problem = problemOf([&] {
        if (partRank >= partitions) return;
        const ManifestFile written = writeShardFile(part, partDir);
        mine = {written.bytes, written.checksum};
      });
      failTogether(problem);
      std::vector<FileRecord> records(part.comm->size());
      queue_->run([&] {
        part.comm->allGather(&mine, records.data(), sizeof(FileRecord) / sizeof(float), DType::F32);
      });
      problem = problemOf([&] {
        if (partRank != 0) return;
        std::vector<ManifestFile> files;
        for (int q = 0; q < partitions; ++q)
          files.push_back(
              {shardFileName(q), records[q].bytes, static_cast<uint32_t>(records[q].checksum)});
        const std::string text =
            manifestText(checkpointManifest(part, place, arrays, std::move(files)));
        writeFileSynced((fs::path(partDir) / "manifest.json").string(),
                        {{text.data(), text.size()}});
      });
      failTogether(problem);  // every part is written
    }
    if (gridRoot) problem = problemOf([&] { publishCheckpointDirectory(staging, dir, tag); });
    // Nobody returns (and perhaps loads or exits) before the checkpoint is in place, and a failure
    // to publish fails every rank.
    failTogether(problem);
  } catch (...) {
    std::error_code ignored;
    for (const Partition& part : parts_)
      fs::remove(fs::path(partitionDir(part, gridDir)) / shardFileName(part.comm->rank()), ignored);
    if (gridRoot) fs::remove_all(staging, ignored);
    throw;
  }
}

ManifestFile Engine::writeShardFile(Partition& part, const std::string& dir) {
  const int rank = part.comm->rank();
  const PartitionLayout& layout = part.zero->shardLayout();
  // The master shard, then each state array over the whole shard; a group's pieces are
  // consecutive runs of each, written at their place while the group is acquired.
  const size_t shard = layout.shardSize();
  ShardFileWriter file((fs::path(dir) / shardFileName(rank)).string());
  forEachStateGroup(
      part, ZeroStage::ShardUse::kRead,
      [&](size_t g, const float* master, const std::vector<OptimizerStateArray>& states) {
        const size_t begin = layout.shardBegin(part.groups[g].t0);
        const size_t count = layout.shardBegin(part.groups[g].t1) - begin;
        file.writeAt(begin * sizeof(float), master, count * sizeof(float));
        for (size_t a = 0; a < states.size(); ++a)
          file.writeAt(((a + 1) * shard + begin) * sizeof(float), states[a].data,
                       states[a].count * sizeof(float));
      });
  const WrittenFile written = file.finish();
  return {shardFileName(rank), written.bytes, written.checksum};
}

CheckpointManifest Engine::checkpointManifest(const Partition& part, const GridPlace& place,
                                              const std::vector<OptimizerStateArray>& arrays,
                                              std::vector<ManifestFile> files) const {
  CheckpointManifest m;
  m.worldSize = comm_.size();
  m.zeroStage = part.zero->stage();
  m.partitions = part.zero->shardLayout().parts();
  m.modelDtype = dtypeName(modelType_);
  m.configHash = config_.configHash;
  m.runId = runId_;
  m.architecture = model_.architecture();
  m.globalSteps = globalSteps_;
  m.skippedSteps = skippedSteps_;
  m.microSteps = microSteps_;
  m.lastGradNorm = lastGradNorm_;
  m.parameters = part.count;
  for (const auto& s : part.specs)
    m.tensors.push_back(
        {s.name, s.numel, s.slice.fullNumel == 0 ? std::nullopt : std::optional(s.slice)});
  m.optimizerName = part.groups.front().optimizer->name();
  m.optimizerSteps = part.groups.front().optimizer->steps();
  for (const auto& a : arrays) m.optimizerArrays.push_back(a.name);
  for (const SubGroup& group : part.groups) {
    const std::vector<double> scalars = group.optimizer->tensorScalars();
    m.optimizerTensorScalars.insert(m.optimizerTensorScalars.end(), scalars.begin(), scalars.end());
  }
  const LossScaler::State s = scaler_.state();
  m.lossScale = s.scale;
  m.lossScalerIteration = s.iteration;
  m.lastOverflowIteration = s.lastOverflowIteration;
  m.hysteresis = s.hysteresis;
  if (scheduler_) m.lrLastBatchIteration = scheduler_->lastBatchIteration();
  m.files = std::move(files);
  if (place.pipe > 1 || place.model > 1)
    m.grid = ManifestGrid{place.pipe, place.model, place.stage, place.modelRank};
  if (parts_.size() > 1) {
    const Communicator* ep = grid_.experts;
    m.experts = ManifestExperts{ep ? ep->size() : 1, part.experts ? (ep ? ep->rank() : 0) : -1};
  }
  return m;
}

std::string Engine::loadCheckpointResident(const std::string& dir, const std::string& requestedTag,
                                           CheckpointLoadScope scope) {
  const std::string tag = requestedTag.empty() ? readLatestTag(dir) : requestedTag;
  checkTag(tag);
  queue_->run([] {});
  // Every part of the saving grid: the top manifest says its pipe and model sizes.
  const std::vector<CheckpointPart> parts = readCheckpointParts((fs::path(dir) / tag).string());
  const CheckpointManifest& m = parts.front().manifest;  // the training state is everyone's
  checkCheckpointFits(parts, scope);
  // A model without grid (one stage, no slices) loads the old form: the same tensors in order.
  // A stage or slice of a grid, or an expert-parallel rank, holds fewer tensors than a one-part
  // checkpoint (the names decide).
  const bool onGrid = (grid_.pipe && grid_.pipe->size() > 1) ||
                      (grid_.model && grid_.model->size() > 1) || parts_.size() > 1;
  if (parts.size() == 1 && !onGrid && dense().specs.size() != parts.front().specs.size())
    throw Error(parts.front().manifestPath + ": the checkpoint has " +
                std::to_string(parts.front().specs.size()) + " parameter tensors, this model " +
                std::to_string(dense().specs.size()));
  std::vector<bool> convertPerGroup;
  for (Partition& part : parts_) {
    // Where each of the partition's tensors comes from (an expert from whichever part holds it:
    // any expert-parallel size).
    const std::vector<std::vector<TensorSource>> sources = tensorSources(parts, part.specs);
    // Every shard file read from is verified whole, then only the pieces of the old slices that
    // overlap this rank's new slices are read: any world size, stage and grid, memory bounded by
    // the own shard.
    verifyPartsToRead(part, parts, sources);
    convertPerGroup.push_back(readStatesFromParts(part, parts, sources, scope));
    if (scope.optimizerStates) restoreOptimizerScalars(part, parts.front());
  }
  if (scope.trainingState) restoreTrainingState(m);
  // The working copy follows the master: converted, gathered or re-sliced as the stage needs.
  for (size_t p = 0; p < parts_.size(); ++p) {
    parts_[p].zero->publishParameters(convertPerGroup[p]);
    parts_[p].zero->zeroGradients();
  }
  return tag;
}

void Engine::checkCheckpointFits(const std::vector<CheckpointPart>& parts,
                                 CheckpointLoadScope scope) const {
  const CheckpointManifest& m = parts.front().manifest;
  const std::string& manifestPath = parts.front().manifestPath;
  // A resume goes on with the saved model: one of another architecture (an activation, a norm)
  // would take the weights without a word when the shapes agree. A finetune may change it.
  if (scope.trainingState && !m.architecture.empty() && m.architecture != model_.architecture())
    throw Error(manifestPath + ": saved from another model architecture (" +
                architectureDifference(m.architecture, model_.architecture()) +
                "); resume with the config that saved it, or start a new run from these "
                "weights with finetune");
  Optimizer& first = *dense().groups.front().optimizer;
  const size_t nStates = first.stateArrays().size();
  if (scope.optimizerStates &&
      (m.optimizerName != first.name() || m.optimizerArrays.size() != nStates))
    throw Error(manifestPath + ": saved with optimizer \"" + m.optimizerName +
                "\", this run uses \"" + first.name() + "\"");
}

void Engine::verifyPartsToRead(Partition& part, const std::vector<CheckpointPart>& parts,
                               const std::vector<std::vector<TensorSource>>& sources) {
  const CheckpointManifest& m = parts.front().manifest;
  const size_t nArrays = 1 + m.optimizerArrays.size();  // in the files
  std::vector<bool> partUsed(parts.size(), false);
  for (const auto& list : sources)
    for (const TensorSource& source : list) partUsed[source.part] = true;
  std::vector<ShardFileCheck> checks;
  for (size_t p = 0; p < parts.size(); ++p) {
    const CheckpointManifest& pm = parts[p].manifest;
    if (pm.optimizerArrays.size() != m.optimizerArrays.size())
      throw Error(parts[p].manifestPath + ": " + std::to_string(pm.optimizerArrays.size()) +
                  " optimizer arrays, the top part " + std::to_string(m.optimizerArrays.size()));
    if (!partUsed[p]) continue;
    for (size_t q = 0; q < pm.files.size(); ++q) {
      const PartitionLayout old(parts[p].specs, static_cast<int>(pm.files.size()),
                                static_cast<int>(q));
      checks.push_back({(fs::path(parts[p].dir) / pm.files[q].name).string(), pm.files[q],
                        nArrays * old.shardSize() * sizeof(float)});
    }
  }
  verifyShardFiles(*part.comm, checks);
}

bool Engine::readStatesFromParts(Partition& part, const std::vector<CheckpointPart>& parts,
                                 const std::vector<std::vector<TensorSource>>& sources,
                                 CheckpointLoadScope scope) {
  ZeroStage& zero = *part.zero;
  const std::vector<ParamSpec>& specs = part.specs;
  const CheckpointManifest& m = parts.front().manifest;
  const std::string& manifestPath = parts.front().manifestPath;
  const size_t nArrays = 1 + m.optimizerArrays.size();         // in the files
  const size_t nLoaded = scope.optimizerStates ? nArrays : 1;  // master weights first
  const int newPart = zero.shardLayout().parts() == 1 ? 0 : zero.shardLayout().rank();
  // Sub-group by sub-group, each acquired from its home (offload_optimizer nvme: into a slot) while
  // its tensors' pieces are read into it, then released (written back): never more than one group
  // beyond the steady state. Where the home streams a separate master, the 16-bit working values
  // are converted from the slot before it goes, as the step does.
  OptimizerStateHome& home = zero.optimizerStates();
  const bool convertPerGroup =
      (home.streamsMaster() || zero.streamsWorkingCopy()) && zero.separateMaster();
  char* halfOut = convertPerGroup ? zero.halfCopyTarget() : nullptr;
  std::vector<uint64_t> loaded(specs.size(), 0);  // elements of the master found, per tensor
  forEachStateGroup(
      part, ZeroStage::ShardUse::kOverwrite,
      [&](size_t g, float* master, const std::vector<OptimizerStateArray>& states) {
        const size_t begin = zero.shardLayout().shardBegin(part.groups[g].t0);
        // Where tensor t's slice of array a (0: master, then the optimizer's arrays) lives now.
        auto destination = [&](size_t a, size_t t) -> float* {
          const size_t offset = zero.shardLayout().tensor(t).shardOffset - begin;
          return (a == 0 ? master : states[a - 1].data) + offset;
        };
        for (size_t a = 0; a < nLoaded; ++a)  // padding of the new slices: zero
          for (size_t t = part.groups[g].t0; t < part.groups[g].t1; ++t) {
            const TensorPlacement& p = zero.shardLayout().tensor(t);
            const size_t valid = std::min(p.slice, p.numel - std::min(p.numel, newPart * p.slice));
            std::fill(destination(a, t) + valid, destination(a, t) + p.slice, 0.0f);
          }
        // The files this group reads from, opened for the group only (a checkpoint of many ranks
        // has many files).
        struct OpenFile {
          PartitionLayout layout;  // the saving rank's shard
          CheckpointReader reader;
        };
        std::map<std::pair<size_t, int>, std::unique_ptr<OpenFile>> open;
        auto file = [&](size_t p, int q) -> OpenFile& {
          std::unique_ptr<OpenFile>& f = open[{p, q}];
          if (!f) {
            const CheckpointManifest& pm = parts[p].manifest;
            f.reset(new OpenFile{
                PartitionLayout(parts[p].specs, static_cast<int>(pm.files.size()), q),
                CheckpointReader((fs::path(parts[p].dir) / pm.files[q].name).string())});
          }
          return *f;
        };
        for (size_t t = part.groups[g].t0; t < part.groups[g].t1; ++t)
          for (const TensorSource& source : sources[t]) {
            const size_t p = source.part;
            const int oldParts = static_cast<int>(parts[p].manifest.files.size());
            for (int q = 0; q < oldParts; ++q) {
              OpenFile& f = file(p, q);
              const PartitionLayout& old = f.layout;
              const TensorPlacement& was = old.tensor(source.tensor);
              const TensorPlacement& now = zero.shardLayout().tensor(t);
              const size_t nowBegin = std::min(now.numel, newPart * now.slice);
              const size_t nowEnd = std::min(now.numel, nowBegin + now.slice);
              const size_t wasBegin = std::min(was.numel, q * was.slice);
              const size_t wasEnd = std::min(was.numel, wasBegin + was.slice);
              const auto copies =
                  sliceOverlaps(specs[t].fullSlice(), nowBegin, nowEnd,
                                parts[p].specs[source.tensor].fullSlice(), wasBegin, wasEnd);
              for (const SliceCopy& c : copies) {
                loaded[t] += c.count;
                for (size_t a = 0; a < nLoaded; ++a)
                  f.reader.read((a * old.shardSize() + was.shardOffset + c.fromLocal - wasBegin) *
                                    sizeof(float),
                                c.count * sizeof(float),
                                destination(a, t) + (c.toLocal - nowBegin));
              }
            }
          }
        if (convertPerGroup)
          convertElements(master, DType::F32, halfOut + begin * dtypeBytes(modelType_), modelType_,
                          zero.shardLayout().shardBegin(part.groups[g].t1) - begin);
      });
  for (size_t t = 0; t < specs.size(); ++t) {
    const TensorPlacement& now = zero.shardLayout().tensor(t);
    const size_t nowBegin = std::min(now.numel, newPart * now.slice);
    const size_t own = std::min(now.numel, nowBegin + now.slice) - nowBegin;
    if (loaded[t] != own)
      throw Error(manifestPath + ": the checkpoint holds " + std::to_string(loaded[t]) + " of " +
                  std::to_string(own) + " elements this rank needs of tensor \"" + specs[t].name +
                  "\" (a part of the grid is missing or overlaps)");
  }
  return convertPerGroup;
}

void Engine::restoreOptimizerScalars(Partition& part, const CheckpointPart& saved) {
  const CheckpointManifest& m = saved.manifest;
  size_t want = 0;
  for (const SubGroup& group : part.groups) want += group.optimizer->tensorScalars().size();
  // Only 1-bit LAMB keeps per-tensor values, at ZeRO 0 where every rank holds every tensor: the
  // saved list covers the partition's tensors in order, whatever the sub-groups were.
  if (m.optimizerTensorScalars.size() != want)
    throw Error(saved.manifestPath + ": optimizer.tensor_scalars has " +
                std::to_string(m.optimizerTensorScalars.size()) + " values, this " +
                part.groups.front().optimizer->name() + " over " +
                std::to_string(part.specs.size()) + " tensors keeps " + std::to_string(want));
  size_t at = 0;
  for (const SubGroup& group : part.groups) {
    group.optimizer->setSteps(m.optimizerSteps);
    const size_t n = group.optimizer->tensorScalars().size();
    if (n == 0) continue;
    const auto from = m.optimizerTensorScalars.begin() + static_cast<std::ptrdiff_t>(at);
    group.optimizer->setTensorScalars(
        std::vector<double>(from, from + static_cast<std::ptrdiff_t>(n)));
    at += n;
  }
}

void Engine::restoreTrainingState(const CheckpointManifest& m) {
  runId_ = m.runId;  // empty from a format-2 checkpoint: the next save draws one
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

Engine::GridPlace Engine::gridPlace() const {
  GridPlace place;
  if (grid_.pipe) {
    place.pipe = grid_.pipe->size();
    place.stage = grid_.pipe->rank();
  }
  if (grid_.model) {
    place.model = grid_.model->size();
    place.modelRank = grid_.model->rank();
  }
  return place;
}

}  // namespace ds::runtime
