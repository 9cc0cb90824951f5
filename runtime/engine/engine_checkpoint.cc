// Engine checkpoints. Layout of dir/tag/:
//   manifest.json      format version, world size, stage, partitions, steps, config hash, model
//                      table, optimizer / scheduler / loss-scaler state, and per shard file its
//                      size and FNV-1a checksum
//   shard_NNNNN.bin    one per partition (one in all at stage 0): the fp32 master shard followed
//                      by each optimizer state array over the same shard, back to back
// Written under dir/.tmp-tag and swapped into place by rank 0 once every rank has written and
// synced its file. Loading reads, from every old shard, the parts of its slices that overlap this
// rank's new slices, so any world size and any stage can load it.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "runtime/checkpoint/checkpoint_files.h"
#include "common/error.h"
#include "runtime/engine/engine.h"

namespace ds::runtime {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
constexpr int kFormatVersion = 1;

std::string shardFileName(int partition) {
  char name[32];
  std::snprintf(name, sizeof(name), "shard_%05d.bin", partition);
  return name;
}

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

void Engine::verifyShardFiles(const std::string& root, const Json& files, size_t arrays) {
  // Each file is checksummed by one rank (file q by rank q mod N), not by all of them; the first
  // failure's message goes to every rank so each one fails naming the file.
  std::string problem;
  for (size_t q = 0; q < files.size(); ++q) {
    if (static_cast<int>(q % comm_.size()) != comm_.rank() || !problem.empty()) continue;
    try {
      const std::string path = (fs::path(root) / files[q]["name"].get<std::string>()).string();
      const uint64_t bytes = files[q]["bytes"].get<uint64_t>();
      const PartitionLayout old(specs_, static_cast<int>(files.size()), static_cast<int>(q));
      if (bytes != arrays * old.shardSize() * sizeof(float))
        throw Error(path + ": the manifest lists " + std::to_string(bytes) + " bytes, expected " +
                    std::to_string(arrays) + " arrays of " + std::to_string(old.shardSize()) +
                    " fp32 values");
      verifyCheckpointFile(path, bytes,
                           std::stoull(files[q]["fnv1a64"].get<std::string>(), nullptr, 16));
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

void Engine::saveCheckpoint(const std::string& dir, const std::string& tag) {
  checkTag(tag);
  queue_->run([] {});  // nothing of a previous step may still be writing the shards
  const std::string staging = (fs::path(dir) / (".tmp-" + tag)).string();
  const int rank = comm_.rank(), world = comm_.size();
  const int partitions = shardLayout_->parts();
  std::string problem;
  if (rank == 0)
    problem = problemOf([&] {
      std::error_code ec;
      fs::create_directories(dir, ec);
      fs::remove_all(staging, ec);  // a crashed earlier save of this tag
      if (!fs::create_directories(staging, ec))
        throw Error(staging + ": cannot create checkpoint directory: " + ec.message());
    });
  failTogether(problem);  // also: the directory exists for everyone now

  FileRecord mine{0, 0};
  const auto arrays = groups_.front().optimizer->stateArrays();
  problem = problemOf([&] {
    if (rank >= partitions) return;
    const size_t shard = shardLayout_->shardSize();
    std::vector<std::pair<const void*, size_t>> pieces = {{masterData(), shard * sizeof(float)}};
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
    Json m;
    m["format"] = "deepspeed-native checkpoint";
    m["version"] = kFormatVersion;
    m["world_size"] = world;
    m["zero_stage"] = stage_;
    m["partitions"] = partitions;
    m["model_dtype"] = dtypeName(modelType_);
    m["config_hash"] = config_.configHash;
    m["global_steps"] = globalSteps_;
    m["skipped_steps"] = skippedSteps_;
    m["micro_steps"] = microSteps_;
    m["last_grad_norm"] = lastGradNorm_;
    Json tensors = Json::array();
    for (const auto& s : specs_) tensors.push_back({{"name", s.name}, {"numel", s.numel}});
    m["model"] = {{"parameters", count_}, {"tensors", tensors}};
    Json names = Json::array();
    for (const auto& a : arrays) names.push_back(a.name);
    m["optimizer"] = {{"name", groups_.front().optimizer->name()},
                      {"steps", groups_.front().optimizer->steps()},
                      {"arrays", names}};
    const LossScaler::State s = scaler_.state();
    m["loss_scaler"] = {{"scale", s.scale},
                        {"iteration", s.iteration},
                        {"last_overflow_iteration", s.lastOverflowIteration},
                        {"hysteresis", s.hysteresis}};
    if (scheduler_) m["lr_schedule"] = {{"last_batch_iteration", scheduler_->lastBatchIteration()}};
    Json files = Json::array();
    for (int q = 0; q < partitions; ++q)
      files.push_back({{"name", shardFileName(q)},
                       {"bytes", records[q].bytes},
                       {"fnv1a64", hex64(records[q].checksum)}});
    m["files"] = files;
    const std::string text = m.dump(2) + "\n";
    writeFileSynced((fs::path(staging) / "manifest.json").string(), {{text.data(), text.size()}});
    publishCheckpointDirectory(staging, dir, tag);
  });
  // Nobody returns (and perhaps loads or exits) before the checkpoint is in place, and a failure
  // to publish fails every rank.
  failTogether(problem);
}

std::string Engine::loadCheckpoint(const std::string& dir, const std::string& requestedTag) {
  const std::string tag = requestedTag.empty() ? readLatestTag(dir) : requestedTag;
  checkTag(tag);
  queue_->run([] {});
  const fs::path root = fs::path(dir) / tag;
  const std::string manifestPath = (root / "manifest.json").string();
  Json m;
  try {
    std::ifstream in(manifestPath);
    if (!in) throw Error(manifestPath + ": cannot read checkpoint manifest");
    m = Json::parse(in);
  } catch (const Json::exception& e) {
    throw Error(manifestPath + ": invalid manifest: " + e.what());
  }
  auto field = [&](const char* key) -> const Json& {
    if (!m.contains(key)) throw Error(manifestPath + ": missing \"" + key + "\"");
    return m[key];
  };
  if (field("version").get<int>() != kFormatVersion)
    throw Error(manifestPath + ": format version " + field("version").dump() +
                ", this build reads version " + std::to_string(kFormatVersion));
  const Json& tensors = field("model")["tensors"];
  if (tensors.size() != specs_.size())
    throw Error(manifestPath + ": the checkpoint has " + std::to_string(tensors.size()) +
                " parameter tensors, this model " + std::to_string(specs_.size()));
  for (size_t t = 0; t < specs_.size(); ++t)
    if (tensors[t]["name"] != specs_[t].name || tensors[t]["numel"] != specs_[t].numel)
      throw Error(manifestPath + ": tensor " + std::to_string(t) + " is " + tensors[t].dump() +
                  ", this model has \"" + specs_[t].name + "\" with " +
                  std::to_string(specs_[t].numel) + " elements");
  Optimizer& first = *groups_.front().optimizer;
  const size_t nStates = first.stateArrays().size();
  const Json& optimizer = field("optimizer");
  if (optimizer["name"] != first.name() || optimizer["arrays"].size() != nStates)
    throw Error(manifestPath + ": saved with optimizer " + optimizer["name"].dump() +
                ", this run uses \"" + first.name() + "\"");

  // Where tensor t's slice of array a (0: master, then the optimizer's arrays) lives here.
  std::vector<std::vector<OptimizerStateArray>> groupArrays;
  for (const SubGroup& group : groups_) groupArrays.push_back(group.optimizer->stateArrays());
  std::vector<size_t> groupOf(specs_.size());
  for (size_t g = 0; g < groups_.size(); ++g)
    for (size_t t = groups_[g].t0; t < groups_[g].t1; ++t) groupOf[t] = g;
  auto destination = [&](size_t a, size_t t) -> float* {
    const size_t offset = shardLayout_->tensor(t).shardOffset;
    if (a == 0) return masterData() + offset;
    const size_t g = groupOf[t];
    return groupArrays[g][a - 1].data + (offset - shardLayout_->shardBegin(groups_[g].t0));
  };

  // Every old shard file is verified whole, then only the pieces of the old slices that overlap
  // this rank's new slices are read: any world size and stage, memory bounded by the own shard.
  const int oldParts = field("partitions").get<int>();
  const Json& files = field("files");
  if (static_cast<int>(files.size()) != oldParts)
    throw Error(manifestPath + ": lists " + std::to_string(files.size()) + " shard files for " +
                std::to_string(oldParts) + " partitions");
  const size_t nArrays = 1 + nStates;
  const int newPart = shardLayout_->parts() == 1 ? 0 : shardLayout_->rank();
  for (size_t a = 0; a < nArrays; ++a)  // padding of the new slices: zero
    for (size_t t = 0; t < specs_.size(); ++t) {
      const TensorPlacement& p = shardLayout_->tensor(t);
      const size_t valid = std::min(p.slice, p.numel - std::min(p.numel, newPart * p.slice));
      std::fill(destination(a, t) + valid, destination(a, t) + p.slice, 0.0f);
    }
  verifyShardFiles(root.string(), files, nArrays);
  for (int q = 0; q < oldParts; ++q) {
    const PartitionLayout old(specs_, oldParts, q);
    const std::string path = (root / files[q]["name"].get<std::string>()).string();
    CheckpointReader reader(path);
    for (size_t t = 0; t < specs_.size(); ++t) {
      const TensorPlacement& was = old.tensor(t);
      const TensorPlacement& now = shardLayout_->tensor(t);
      const size_t lo = std::max(q * was.slice, newPart * now.slice);
      const size_t hi = std::min({(q + 1) * was.slice, (newPart + 1) * now.slice, was.numel});
      if (lo >= hi) continue;
      for (size_t a = 0; a < nArrays; ++a)
        reader.read((a * old.shardSize() + was.shardOffset + lo - q * was.slice) * sizeof(float),
                    (hi - lo) * sizeof(float), destination(a, t) + (lo - newPart * now.slice));
    }
  }
  for (const SubGroup& group : groups_)
    group.optimizer->setSteps(optimizer["steps"].get<int64_t>());

  globalSteps_ = field("global_steps").get<int64_t>();
  skippedSteps_ = field("skipped_steps").get<int64_t>();
  microSteps_ = field("micro_steps").get<int64_t>();
  lastGradNorm_ = field("last_grad_norm").get<double>();
  const Json& s = field("loss_scaler");
  scaler_.restore({s["scale"].get<double>(), s["iteration"].get<int64_t>(),
                   s["last_overflow_iteration"].get<int64_t>(), s["hysteresis"].get<int64_t>()});
  if (scheduler_ && m.contains("lr_schedule")) {
    scheduler_->setLastBatchIteration(m["lr_schedule"]["last_batch_iteration"].get<int64_t>());
    lr_ = scheduler_->lr();
  }
  // The working copy follows the master: converted, gathered or re-sliced as the stage needs.
  publishParameters();
  zeroGradients();
  return tag;
}

}  // namespace ds::runtime
