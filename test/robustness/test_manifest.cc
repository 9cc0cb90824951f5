// Checkpoint manifests read as untrusted input: a round trip, then damaged and hostile manifests,
// each refused with a message naming the manifest and the key.
#include <catch2/catch.hpp>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "common/crc32c.h"
#include "common/error.h"
#include "runtime/checkpoint/manifest.h"

using namespace ds::runtime;
using Json = nlohmann::json;

namespace {

CheckpointManifest sample() {
  CheckpointManifest c;
  c.worldSize = 2;
  c.zeroStage = 2;
  c.partitions = 2;
  c.modelDtype = "bf16";
  c.configHash = "0123456789abcdef";
  c.runId = "00112233445566778899aabbccddeeff";
  c.architecture = "gpt num-layers=2 activation=gelu";
  c.globalSteps = 10;
  c.microSteps = 20;
  c.lastGradNorm = 0.125;
  c.parameters = 12;
  c.tensors = {{"w", 8, ds::SliceMap{32, {{2, 2, 4, 8}}}}, {"b", 4, std::nullopt}};
  c.grid = ManifestGrid{2, 4, 1, 3};
  c.optimizerName = "adamw";
  c.optimizerSteps = 10;
  c.optimizerArrays = {"exp_avg", "exp_avg_sq"};
  c.optimizerTensorScalars = {0.25, 1.05, 0.0, 0.125, 0.95, 2.5};  // 1-bit LAMB's, two tensors
  c.lossScale = 65536;
  c.lastOverflowIteration = -1;
  c.lrLastBatchIteration = 9;
  c.files = {{shardFileName(0), 72, 0x1234}, {shardFileName(1), 72, 0xabcdef01u}};
  return c;
}

// The sample's JSON after `edit`, re-sealed with a valid checksum, so that only the edit is wrong.
std::string edited(const std::function<void(Json&)>& edit) {
  Json m = Json::parse(manifestText(sample()));
  m.erase("manifest_checksum");
  edit(m);
  const std::string body = m.dump();
  m["manifest_checksum"] = "crc32c:" + ds::hex32(ds::crc32c(body.data(), body.size()));
  return m.dump();
}

}  // namespace

TEST_CASE("manifest: what is written is read back") {
  const CheckpointManifest c = parseManifest(manifestText(sample()), "m.json");
  CHECK(c.partitions == 2);
  CHECK(c.tensors.at(1).name == "b");
  CHECK(c.files.at(0).checksum == 0x1234u);
  CHECK(c.files.at(1).checksum == 0xabcdef01u);
  // Each checksum names its algorithm.
  const Json m = Json::parse(manifestText(sample()));
  CHECK(m["version"] == 3);
  CHECK(c.runId == sample().runId);
  CHECK(c.architecture == sample().architecture);
  CHECK(m["files"][0]["checksum"] == "crc32c:00001234");
  CHECK(m["files"][1]["checksum"] == "crc32c:abcdef01");
  CHECK(m["manifest_checksum"].get<std::string>().starts_with("crc32c:"));
  CHECK(c.lastOverflowIteration == -1);
  CHECK(c.lrLastBatchIteration == 9);
  CHECK(c.lastGradNorm == 0.125);
  // A model-parallel slice and the grid round-trip; an unsliced tensor has none.
  REQUIRE(c.tensors.at(0).slice);
  CHECK(*c.tensors.at(0).slice == ds::SliceMap{32, {{2, 2, 4, 8}}});
  CHECK_FALSE(c.tensors.at(1).slice);
  REQUIRE(c.grid);
  CHECK((c.grid->pipe == 2 && c.grid->model == 4 && c.grid->stage == 1 && c.grid->modelRank == 3));
  // Per-tensor optimizer values round-trip exactly; an optimizer without them writes none.
  CHECK(c.optimizerTensorScalars == sample().optimizerTensorScalars);
  CheckpointManifest plain = sample();
  plain.optimizerTensorScalars.clear();
  CHECK_FALSE(Json::parse(manifestText(plain))["optimizer"].contains("tensor_scalars"));
  CHECK(parseManifest(manifestText(plain), "m.json").optimizerTensorScalars.empty());
}

TEST_CASE("manifest: damaged or hostile manifests are refused, naming the key") {
  struct Case {
    const char* name;
    std::string text;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"edited without resealing",
       [] {
         std::string t = manifestText(sample());
         t.replace(t.find("\"global_steps\": 10"), 18, "\"global_steps\": 11");
         return t;
       }(),
       "checksum does not match"},
      {"missing key", edited([](Json& m) { m.erase("global_steps"); }),
       "m.json: global_steps: missing"},
      {"nested missing key", edited([](Json& m) { m["loss_scaler"].erase("scale"); }),
       "loss_scaler.scale: missing"},
      {"wrong type", edited([](Json& m) { m["partitions"] = "2"; }),
       "partitions: expected an integer"},
      {"no partitions", edited([](Json& m) {
         m["partitions"] = 0;
         m["files"] = Json::array();
       }),
       "partitions: out of range: 0"},
      {"absolute shard name", edited([](Json& m) { m["files"][1]["name"] = "/etc/passwd"; }),
       "files[1].name: \"/etc/passwd\" (expected \"shard_00001.bin\")"},
      {"relative escape", edited([](Json& m) { m["files"][0]["name"] = "../x/shard_00000.bin"; }),
       "files[0].name"},
      {"bad checksum digits", edited([](Json& m) { m["files"][0]["checksum"] = "crc32c:xyz"; }),
       "files[0].checksum: expected \"crc32c:\" and 8 lower-case hex digits, got \"crc32c:xyz\""},
      {"no algorithm named", edited([](Json& m) { m["files"][0]["checksum"] = "00001234"; }),
       "files[0].checksum: expected \"crc32c:\" and 8 lower-case hex digits"},
      {"a file checksum of another algorithm",
       edited([](Json& m) { m["files"][1]["checksum"] = "sha256:00ff"; }),
       "files[1].checksum: checksum algorithm \"sha256\": this build verifies crc32c only"},
      {"a manifest sealed with another algorithm",
       [] {
         Json m = Json::parse(manifestText(sample()));
         m["manifest_checksum"] = "xxhash64:0123456789abcdef";
         return m.dump();
       }(),
       "m.json: manifest_checksum: checksum algorithm \"xxhash64\": this build verifies crc32c "
       "only"},
      {"an older version's manifest (FNV-1a checksums)",
       [] {
         Json m = Json::parse(manifestText(sample()));
         m.erase("manifest_checksum");
         m["version"] = 1;
         for (Json& f : m["files"]) {
           f.erase("checksum");
           f["fnv1a64"] = "0000000000001234";
         }
         m["manifest_fnv1a64"] = "0123456789abcdef";
         return m.dump();
       }(),
       "m.json: written by an older version of deepspeed-native (format 1, checksums fnv1a64); "
       "this build reads format 3 (crc32c checksums): load it with the build that saved it and "
       "save it again"},
      {"fewer files than partitions", edited([](Json& m) { m["files"].erase(1); }),
       "files: lists 1 shard files for 2 partitions"},
      {"stage out of range", edited([](Json& m) { m["zero_stage"] = 7; }),
       "zero_stage: out of range"},
      {"huge unsigned", edited([](Json& m) { m["global_steps"] = 18446744073709551615ULL; }),
       "global_steps: out of range"},
      {"a slice outside its tensor",
       edited([](Json& m) { m["model"]["tensors"][0]["slice"]["runs"][0][0] = 30; }),
       "model.tensors[0].slice: run 0 leaves the tensor's 32 elements"},
      {"a slice of another size",
       edited([](Json& m) { m["model"]["tensors"][0]["slice"]["runs"][0][2] = 3; }),
       "the runs hold 6 elements, the tensor 8"},
      {"a slice run that is not four integers",
       edited([](Json& m) { m["model"]["tensors"][0]["slice"]["runs"][0] = Json::array({1, -2}); }),
       "expected [full_begin, count, repeat, stride]"},
      {"per-tensor optimizer values that are not a list",
       edited([](Json& m) { m["optimizer"]["tensor_scalars"] = 1.5; }),
       "m.json: optimizer.tensor_scalars: expected a list"},
      {"a per-tensor optimizer value that is not a number",
       edited([](Json& m) { m["optimizer"]["tensor_scalars"][1] = "1.05"; }),
       "m.json: optimizer.tensor_scalars[1]: expected a finite number"},
      {"a grid stage outside the grid", edited([](Json& m) { m["grid"]["stage"] = 2; }),
       "grid.stage: out of range"},
      {"a run id that is not 32 hex digits", edited([](Json& m) { m["run"]["id"] = "abc"; }),
       "m.json: run.id: expected 32 lower-case hex digits, got \"abc\""},
      {"no run", edited([](Json& m) { m.erase("run"); }), "m.json: run: missing"},
      {"an empty architecture", edited([](Json& m) { m["model"]["architecture"] = ""; }),
       "model.architecture: expected printable text"},
      {"a version from the future", edited([](Json& m) { m["version"] = 4; }),
       "format version 4, this build reads versions 2 to 3"},
      {"not an object", "[1, 2]", "expected an object"},
      {"deep nesting", std::string(100000, '[') + std::string(100000, ']'),
       "m.json: nested more than 16 levels deep at line 1, column 17"},
      {"trailing garbage", manifestText(sample()) + "x", "m.json: invalid JSON"},
  };
  for (const auto& c : cases) {
    INFO(c.name);
    CHECK_THROWS_AS(parseManifest(c.text, "m.json"), ds::Error);
    CHECK_THROWS_WITH(parseManifest(c.text, "m.json"), Catch::Contains(c.message));
  }
}

TEST_CASE("manifest: an unreadable or oversized file is an error naming it") {
  CHECK_THROWS_WITH(readManifest("/nonexistent/manifest.json"),
                    Catch::Contains("/nonexistent/manifest.json: cannot open checkpoint manifest"));
  CHECK_THROWS_WITH(readManifest("/dev/zero"),
                    Catch::Contains("/dev/zero: cannot read checkpoint manifest: is a character "
                                    "device, not a regular file"));
}

TEST_CASE("manifest: format 2 (no run id or architecture) is still read") {
  const CheckpointManifest c = parseManifest(edited([](Json& m) {
                                               m["version"] = 2;
                                               m.erase("run");
                                               m["model"].erase("architecture");
                                             }),
                                             "m.json");
  CHECK(c.runId.empty());
  CHECK(c.architecture.empty());
  CHECK(c.globalSteps == 10);
}

TEST_CASE("manifest: a part of another save differs from the top part, and says how") {
  const CheckpointManifest top = sample();
  CHECK(partDifference(top, top).empty());
  struct Case {
    std::function<void(CheckpointManifest&)> edit;
    const char* difference;
  };
  for (const Case& c : std::vector<Case>{
           {[](CheckpointManifest& m) { m.globalSteps = 8; }, "global_steps 8, the top part's 10"},
           {[](CheckpointManifest& m) { m.runId = std::string(32, 'f'); },
            "run.id \"ffffffffffffffffffffffffffffffff\", the top part's "
            "\"00112233445566778899aabbccddeeff\""},
           {[](CheckpointManifest& m) { m.architecture = "gpt num-layers=2 activation=relu"; },
            "model.architecture: activation relu, the top part's gelu"},
           {[](CheckpointManifest& m) { m.architecture = "mlp layer-sizes=4,4"; },
            "model.architecture: \"mlp layer-sizes=4,4\", the top part's \"gpt num-layers=2 "
            "activation=gelu\""},
           {[](CheckpointManifest& m) { m.runId.clear(); }, "run.id \"\", the top part's"},
           {[](CheckpointManifest& m) { m.optimizerSteps = 3; }, "optimizer.steps 3"},
           {[](CheckpointManifest& m) { m.lrLastBatchIteration.reset(); },
            "lr_schedule.last_batch_iteration"},
       }) {
    CheckpointManifest part = top;
    c.edit(part);
    INFO(c.difference);
    CHECK_THAT(partDifference(top, part), Catch::Contains(c.difference));
  }
}

TEST_CASE("manifest: run ids are 32 hex digits and differ between draws") {
  const std::string a = newRunId(), b = newRunId();
  CHECK(a.size() == 32);
  CHECK(a.find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(a != b);
}
