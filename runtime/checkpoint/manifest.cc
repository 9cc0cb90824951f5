// Manifest JSON: written by nlohmann::json (sorted keys, so dump() is canonical) and checked on
// reading through one accessor that names the key path of anything missing, mistyped or out of
// range. Checksums are CRC32C, written with the algorithm's name ("crc32c:1a2b3c4d"); the
// manifest's own covers dump() of everything but itself.
#include "runtime/checkpoint/manifest.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <type_traits>

#include "common/crc32c.h"
#include "common/error.h"
#include "common/files.h"
#include "common/fnv1a.h"
#include "common/json_text.h"
#include "common/printable.h"

namespace ds::runtime {
namespace {

using Json = nlohmann::json;
// Version 1 named its checksums "fnv1a64" (FNV-1a 64); version 2 has "checksum": "crc32c:...";
// version 3 adds the run's id and the model's architecture, which every part must share.
constexpr int kFormatVersion = 3;
constexpr int kOldestReadableVersion = 2;
constexpr size_t kRunIdDigits = 32;
constexpr size_t kMaxArchitectureBytes = 4096;
constexpr const char* kFormatName = "deepspeed-native checkpoint";
constexpr const char* kChecksumKey = "manifest_checksum";
constexpr const char* kVersion1ChecksumKey = "manifest_fnv1a64";
constexpr std::string_view kAlgorithmPrefix = "crc32c:";
// 65536 partitions' file entries take about 7 MiB, a model's tensor table far less.
constexpr size_t kMaxManifestBytes = size_t{16} << 20;
constexpr int kMaxDepth = 16;

std::string checksumText(uint32_t crc) { return std::string(kAlgorithmPrefix) + hex32(crc); }

uint32_t checksumOf(const Json& withoutChecksum) {
  const std::string text = withoutChecksum.dump();
  return crc32c(text.data(), text.size());
}

// Checked access to one manifest: every getter names the path of the value it reads.
class Reader {
 public:
  explicit Reader(const std::string& path) : path_(path) {}

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw Error(path_ + ": " + key + ": " + what +
                " (the checkpoint is damaged or not one of ours)");
  }
  const Json& at(const Json& object, const std::string& parent, const char* key) const {
    const std::string name = parent.empty() ? key : parent + "." + key;
    if (!object.is_object()) fail(parent, "expected an object");
    const auto it = object.find(key);
    if (it == object.end()) fail(name, "missing");
    return *it;
  }
  int64_t integer(const Json& object, const std::string& parent, const char* key, int64_t min,
                  int64_t max = std::numeric_limits<int64_t>::max()) const {
    const Json& v = at(object, parent, key);
    const std::string name = parent.empty() ? key : parent + "." + key;
    if (!v.is_number_integer()) fail(name, "expected an integer, got " + v.dump());
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(max))
      fail(name, "out of range: " + v.dump());
    const int64_t value = v.get<int64_t>();
    if (value < min || value > max)
      fail(name, "out of range: " + std::to_string(value) + " (expected " + std::to_string(min) +
                     ".." + std::to_string(max) + ")");
    return value;
  }
  double number(const Json& object, const std::string& parent, const char* key) const {
    const Json& v = at(object, parent, key);
    if (!v.is_number()) fail(parent.empty() ? key : parent + "." + key, "expected a number");
    return v.get<double>();
  }
  std::string text(const Json& object, const std::string& parent, const char* key) const {
    const Json& v = at(object, parent, key);
    if (!v.is_string()) fail(parent.empty() ? key : parent + "." + key, "expected a string");
    return v.get<std::string>();
  }
  const Json& array(const Json& object, const std::string& parent, const char* key) const {
    const Json& v = at(object, parent, key);
    if (!v.is_array()) fail(parent.empty() ? key : parent + "." + key, "expected a list");
    return v;
  }
  // "crc32c:" and 8 lower-case hex digits; another algorithm's name is refused as such.
  uint32_t crc32cText(const std::string& key, const std::string& text) const {
    const size_t colon = text.find(':');
    if (colon != std::string::npos && text.compare(0, colon + 1, kAlgorithmPrefix) != 0)
      fail(key, "checksum algorithm \"" + printable(text.substr(0, std::min<size_t>(colon, 40))) +
                    "\": this build verifies crc32c only");
    const std::string digits = colon == std::string::npos ? "" : text.substr(colon + 1);
    if (colon == std::string::npos || digits.size() != 8 ||
        digits.find_first_not_of("0123456789abcdef") != std::string::npos)
      fail(key, "expected \"crc32c:\" and 8 lower-case hex digits, got \"" +
                    printable(text.substr(0, 40)) + "\"");
    return static_cast<uint32_t>(std::stoul(digits, nullptr, 16));
  }

 private:
  std::string path_;
};


// What must hold before any field is read: a bounded file list, a checksum that matches and a
// format this build reads. Returns the format version.
int64_t checkEnvelope(const Reader& r, const Json& m, const std::string& path) {
  if (!m.is_object()) r.fail("(top level)", "expected an object");
  // The count first: nothing is checksummed or built for more shards than a job has ranks.
  if (const auto files = m.find("files");
      files != m.end() && files->is_array() &&
      files->size() > static_cast<size_t>(kMaxCheckpointPartitions))
    r.fail("files", "lists " + std::to_string(files->size()) + " shard files, more than the " +
                        std::to_string(kMaxCheckpointPartitions) + " ranks a job can have");
  // Refused, not verified with FNV-1a: one checksum algorithm is all this build carries.
  if (m.contains(kVersion1ChecksumKey) && !m.contains(kChecksumKey))
    throw Error(path +
                ": written by an older version of deepspeed-native (format 1, checksums fnv1a64); "
                "this build reads "
                "format " +
                std::to_string(kFormatVersion) +
                " (crc32c checksums): load it with the build that saved it and save it again");
  const std::string stored = r.text(m, "", kChecksumKey);
  Json rest = m;
  rest.erase(kChecksumKey);
  if (r.crc32cText(kChecksumKey, stored) != checksumOf(rest))
    throw Error(path +
                ": the manifest's checksum does not match its content (edited or "
                "damaged); restore it or use another checkpoint");
  if (r.text(m, "", "format") != kFormatName)
    r.fail("format", "not \"" + std::string(kFormatName) + "\"");
  const int64_t version = r.integer(m, "", "version", 0);
  if (version < kOldestReadableVersion || version > kFormatVersion)
    throw Error(path + ": format version " + std::to_string(version) +
                ", this build reads versions " + std::to_string(kOldestReadableVersion) + " to " +
                std::to_string(kFormatVersion));
  return version;
}

// The save's shape (world size, stage, partitions, dtype, config), its run and its step counters.
void readRunAndCounters(const Reader& r, const Json& m, int64_t version, CheckpointManifest& c) {
  c.worldSize = r.integer(m, "", "world_size", 1, kMaxCheckpointPartitions);
  c.zeroStage = r.integer(m, "", "zero_stage", 0, 3);
  c.partitions = r.integer(m, "", "partitions", 1, kMaxCheckpointPartitions);
  // An expert part is partitioned over the expert-data group: world size / expert parallel.
  if (const Json* e = m.contains("experts") ? &m["experts"] : nullptr) {
    ManifestExperts x;
    x.parallel = r.integer(*e, "experts", "parallel", 1, kMaxCheckpointPartitions);
    if (c.worldSize % x.parallel != 0)
      r.fail("experts.parallel", std::to_string(x.parallel) + " does not divide world size " +
                                     std::to_string(c.worldSize));
    if (e->contains("rank")) x.rank = r.integer(*e, "experts", "rank", 0, x.parallel - 1);
    c.experts = x;
  }
  const int64_t group =
      c.experts && c.experts->rank >= 0 ? c.worldSize / c.experts->parallel : c.worldSize;
  if (c.partitions != 1 && c.partitions != group)
    r.fail("partitions", std::to_string(c.partitions) + " for a group of " + std::to_string(group) +
                             " (expected 1 or the group's size: the world "
                             "size, over expert parallel in an experts' part)");
  c.modelDtype = r.text(m, "", "model_dtype");
  c.configHash = r.text(m, "", "config_hash");
  if (version >= 3) {
    c.runId = r.text(r.at(m, "", "run"), "run", "id");
    if (c.runId.size() != kRunIdDigits ||
        c.runId.find_first_not_of("0123456789abcdef") != std::string::npos)
      r.fail("run.id", "expected " + std::to_string(kRunIdDigits) +
                           " lower-case hex digits, got \"" + printable(c.runId.substr(0, 40)) +
                           "\"");
  }
  c.globalSteps = r.integer(m, "", "global_steps", 0);
  c.skippedSteps = r.integer(m, "", "skipped_steps", 0);
  c.microSteps = r.integer(m, "", "micro_steps", 0);
  c.lastGradNorm = r.number(m, "", "last_grad_norm");
}

// A tensor's "slice": which elements of the full tensor this part holds, as strided runs.
SliceMap readSliceMap(const Reader& r, const Json& slice, const std::string& where,
                      uint64_t numel, const std::string& path) {
  SliceMap map;
  map.fullNumel = static_cast<uint64_t>(r.integer(slice, where, "full_numel", 1));
  const Json& runs = r.array(slice, where, "runs");
  for (size_t k = 0; k < runs.size(); ++k) {
    const std::string run = where + ".runs[" + std::to_string(k) + "]";
    if (!runs[k].is_array() || runs[k].size() != 4)
      r.fail(run, "expected [full_begin, count, repeat, stride]");
    uint64_t v[4];
    for (size_t i = 0; i < 4; ++i) {
      if (!runs[k][i].is_number_unsigned()) r.fail(run, "expected non-negative integers");
      v[i] = runs[k][i].get<uint64_t>();
    }
    map.runs.push_back({v[0], v[1], v[2], v[3]});
  }
  if (map.runs.empty()) r.fail(where + ".runs", "empty");
  try {
    checkSliceMap(map, numel, path + ": " + where);
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + " (the checkpoint is damaged or not one of ours)");
  }
  return map;
}

void readModel(const Reader& r, const Json& model, int64_t version, const std::string& path,
               CheckpointManifest& c) {
  c.parameters = static_cast<uint64_t>(r.integer(model, "model", "parameters", 0));
  if (version >= 3) {
    c.architecture = r.text(model, "model", "architecture");
    if (c.architecture.empty() || c.architecture.size() > kMaxArchitectureBytes ||
        printable(c.architecture) != c.architecture)
      r.fail("model.architecture", "expected printable text of 1.." +
                                       std::to_string(kMaxArchitectureBytes) + " bytes");
  }
  const Json& tensors = r.array(model, "model", "tensors");
  for (size_t t = 0; t < tensors.size(); ++t) {
    const std::string at = "model.tensors[" + std::to_string(t) + "]";
    ManifestTensor tensor{r.text(tensors[t], at, "name"),
                          static_cast<uint64_t>(r.integer(tensors[t], at, "numel", 0)),
                          std::nullopt};
    if (tensors[t].is_object() && tensors[t].contains("slice"))
      tensor.slice = readSliceMap(r, tensors[t]["slice"], at + ".slice", tensor.numel, path);
    c.tensors.push_back(std::move(tensor));
  }
}

void readOptimizerAndScaler(const Reader& r, const Json& m, CheckpointManifest& c) {
  const Json& optimizer = r.at(m, "", "optimizer");
  c.optimizerName = r.text(optimizer, "optimizer", "name");
  c.optimizerSteps = r.integer(optimizer, "optimizer", "steps", 0);
  const Json& arrays = r.array(optimizer, "optimizer", "arrays");
  for (size_t a = 0; a < arrays.size(); ++a) {
    if (!arrays[a].is_string())
      r.fail("optimizer.arrays[" + std::to_string(a) + "]", "expected a string");
    c.optimizerArrays.push_back(arrays[a].get<std::string>());
  }
  if (optimizer.is_object() && optimizer.contains("tensor_scalars")) {
    const Json& scalars = r.array(optimizer, "optimizer", "tensor_scalars");
    for (size_t i = 0; i < scalars.size(); ++i) {
      if (!scalars[i].is_number() || !std::isfinite(scalars[i].get<double>()))
        r.fail("optimizer.tensor_scalars[" + std::to_string(i) + "]", "expected a finite number");
      c.optimizerTensorScalars.push_back(scalars[i].get<double>());
    }
  }

  const Json& scaler = r.at(m, "", "loss_scaler");
  c.lossScale = r.number(scaler, "loss_scaler", "scale");
  c.lossScalerIteration = r.integer(scaler, "loss_scaler", "iteration", 0);
  c.lastOverflowIteration = r.integer(scaler, "loss_scaler", "last_overflow_iteration", -1);
  c.hysteresis = r.integer(scaler, "loss_scaler", "hysteresis", 0);
  if (m.contains("lr_schedule"))
    c.lrLastBatchIteration = r.integer(m["lr_schedule"], "lr_schedule", "last_batch_iteration", -1);
}

void readFiles(const Reader& r, const Json& m, CheckpointManifest& c) {
  const Json& files = r.array(m, "", "files");
  if (static_cast<int64_t>(files.size()) != c.partitions)
    r.fail("files", "lists " + std::to_string(files.size()) + " shard files for " +
                        std::to_string(c.partitions) + " partitions");
  for (size_t q = 0; q < files.size(); ++q) {
    const std::string at = "files[" + std::to_string(q) + "]";
    ManifestFile f;
    f.name = r.text(files[q], at, "name");
    // Only the saver's own names: an absolute or "../" name would read outside the checkpoint.
    if (f.name != shardFileName(static_cast<int>(q)))
      r.fail(at + ".name", "\"" + f.name.substr(0, 80) + "\" (expected \"" +
                               shardFileName(static_cast<int>(q)) + "\")");
    f.bytes = static_cast<uint64_t>(r.integer(files[q], at, "bytes", 0));
    f.checksum = r.crc32cText(at + ".checksum", r.text(files[q], at, "checksum"));
    c.files.push_back(std::move(f));
  }
}

ManifestGrid readGrid(const Reader& r, const Json& grid) {
  ManifestGrid g;
  g.pipe = r.integer(grid, "grid", "pipe", 1, kMaxCheckpointPartitions);
  g.model = r.integer(grid, "grid", "model", 1, kMaxCheckpointPartitions);
  g.stage = r.integer(grid, "grid", "stage", 0, g.pipe - 1);
  g.modelRank = r.integer(grid, "grid", "model_rank", 0, g.model - 1);
  return g;
}

}  // namespace

std::string shardFileName(int partition) {
  char name[32];
  std::snprintf(name, sizeof(name), "shard_%05d.bin", partition);
  return name;
}

std::string manifestText(const CheckpointManifest& c) {
  Json m;
  m["format"] = kFormatName;
  m["version"] = kFormatVersion;
  m["world_size"] = c.worldSize;
  m["zero_stage"] = c.zeroStage;
  m["partitions"] = c.partitions;
  m["model_dtype"] = c.modelDtype;
  m["config_hash"] = c.configHash;
  m["run"] = {{"id", c.runId}};
  m["global_steps"] = c.globalSteps;
  m["skipped_steps"] = c.skippedSteps;
  m["micro_steps"] = c.microSteps;
  m["last_grad_norm"] = c.lastGradNorm;
  Json tensors = Json::array();
  for (const auto& t : c.tensors) {
    Json tensor = {{"name", t.name}, {"numel", t.numel}};
    if (t.slice) {
      Json runs = Json::array();
      for (const StridedRun& run : t.slice->runs)
        runs.push_back({run.fullBegin, run.count, run.repeat, run.stride});
      tensor["slice"] = {{"full_numel", t.slice->fullNumel}, {"runs", runs}};
    }
    tensors.push_back(std::move(tensor));
  }
  m["model"] = {
      {"parameters", c.parameters}, {"architecture", c.architecture}, {"tensors", tensors}};
  m["optimizer"] = {
      {"name", c.optimizerName}, {"steps", c.optimizerSteps}, {"arrays", c.optimizerArrays}};
  if (!c.optimizerTensorScalars.empty())
    m["optimizer"]["tensor_scalars"] = c.optimizerTensorScalars;
  m["loss_scaler"] = {{"scale", c.lossScale},
                      {"iteration", c.lossScalerIteration},
                      {"last_overflow_iteration", c.lastOverflowIteration},
                      {"hysteresis", c.hysteresis}};
  if (c.lrLastBatchIteration)
    m["lr_schedule"] = {{"last_batch_iteration", *c.lrLastBatchIteration}};
  Json files = Json::array();
  for (const auto& f : c.files)
    files.push_back({{"name", f.name}, {"bytes", f.bytes}, {"checksum", checksumText(f.checksum)}});
  m["files"] = files;
  if (c.experts) {
    m["experts"] = {{"parallel", c.experts->parallel}};
    if (c.experts->rank >= 0) m["experts"]["rank"] = c.experts->rank;
  }
  if (c.grid)
    m["grid"] = {{"pipe", c.grid->pipe},
                 {"model", c.grid->model},
                 {"stage", c.grid->stage},
                 {"model_rank", c.grid->modelRank}};
  m[kChecksumKey] = checksumText(checksumOf(m));
  return m.dump(2) + "\n";
}

CheckpointManifest parseManifest(std::string_view text, const std::string& path) {
  // Bounded nesting: a hostile file of nested brackets must not exhaust the stack.
  const Json m = parseJsonText(text, path, {kMaxDepth, DuplicateKeys::Refuse});
  const Reader r(path);
  const int64_t version = checkEnvelope(r, m, path);
  CheckpointManifest c;
  readRunAndCounters(r, m, version, c);
  readModel(r, r.at(m, "", "model"), version, path, c);
  readOptimizerAndScaler(r, m, c);
  readFiles(r, m, c);
  if (m.contains("grid")) c.grid = readGrid(r, m["grid"]);
  return c;
}

std::string partDifference(const CheckpointManifest& top, const CheckpointManifest& part) {
  auto differs = [](const std::string& key, const auto& was, const auto& is) -> std::string {
    if (was == is) return "";
    auto text = [](const auto& v) {
      if constexpr (std::is_same_v<std::decay_t<decltype(v)>, std::string>)
        return "\"" + printable(v.substr(0, 200)) + "\"";
      else
        return std::to_string(v);
    };
    return key + " " + text(is) + ", the top part's " + text(was);
  };
  // The run first: a part of another run differs in everything after it too.
  for (std::string d :
       {differs("run.id", top.runId, part.runId),
        top.architecture == part.architecture
            ? std::string()
            : "model.architecture: " +
                  architectureDifference(top.architecture, part.architecture, "the top part's"),
        differs("global_steps", top.globalSteps, part.globalSteps),
        differs("skipped_steps", top.skippedSteps, part.skippedSteps),
        differs("micro_steps", top.microSteps, part.microSteps),
        differs("optimizer.steps", top.optimizerSteps, part.optimizerSteps),
        differs("optimizer.name", top.optimizerName, part.optimizerName),
        differs("zero_stage", top.zeroStage, part.zeroStage),
        differs("world_size", top.worldSize, part.worldSize),
        differs("model_dtype", top.modelDtype, part.modelDtype),
        differs("config_hash", top.configHash, part.configHash),
        differs("loss_scaler.iteration", top.lossScalerIteration, part.lossScalerIteration),
        differs("lr_schedule.last_batch_iteration", top.lrLastBatchIteration.value_or(-2),
                part.lrLastBatchIteration.value_or(-2))})
    if (!d.empty()) return d;
  return "";
}

std::string architectureDifference(const std::string& saved, const std::string& current,
                                  const std::string& savedName) {
  auto words = [](const std::string& line) {
    std::vector<std::string> out;
    for (size_t at = 0; at < line.size();) {
      const size_t end = std::min(line.find(' ', at), line.size());
      if (end > at) out.push_back(line.substr(at, end - at));
      at = end + 1;
    }
    return out;
  };
  const std::vector<std::string> was = words(saved), is = words(current);
  if (was.size() == is.size())
    for (size_t w = 0; w < was.size(); ++w) {
      const size_t eq = was[w].find('=');
      if (was[w] == is[w]) continue;
      if (eq == std::string::npos || is[w].compare(0, eq + 1, was[w], 0, eq + 1) != 0) break;
      return was[w].substr(0, eq) + " " + printable(is[w].substr(eq + 1)) + ", " + savedName +
             " " + printable(was[w].substr(eq + 1));
    }
  return "\"" + printable(current) + "\", " + savedName + " \"" + printable(saved) + "\"";
}

std::string newRunId() {
  std::random_device entropy;
  std::string id;
  for (int word = 0; word < 4; ++word) id += hex32(static_cast<uint32_t>(entropy()));
  return id;
}

CheckpointManifest readManifest(const std::string& path) {
  return parseManifest(readWholeFile(path, "checkpoint manifest", kMaxManifestBytes), path);
}

}  // namespace ds::runtime
