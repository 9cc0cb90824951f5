// The NeoX key table against NeoX's own documented list (test/neox/neox_arguments.tsv, extracted
// from GPT-NeoX's configs/neox_arguments.md): every argument is known, its documented default
// never fails, and a feature that is not implemented is refused only when switched on, by name,
// with the value that switches it off.
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "runtime/config/neox_config.h"
#include "runtime/config/neox_keys.h"

using namespace ds::runtime;
using Json = nlohmann::json;

namespace {

struct NeoxArgument {
  std::string section, name, type, defaultText;
};

std::vector<NeoxArgument> neoxDocumentedArguments() {
  std::ifstream in(std::string(DS_SOURCE_DIR) + "/test/neox/neox_arguments.tsv");
  REQUIRE(in);
  std::vector<NeoxArgument> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> fields;
    std::stringstream s(line);
    std::string f;
    while (std::getline(s, f, '\t')) fields.push_back(f);
    fields.resize(4);
    out.push_back({fields[0], fields[1], fields[2], fields[3]});
  }
  return out;
}

std::string hyphenated(std::string key) {
  for (char& c : key)
    if (c == '_') c = '-';
  return key;
}

// The documented default as NeoX's YAML loader would produce it.
Json defaultValue(const NeoxArgument& a) {
  const std::string& d = a.defaultText;
  if (d == "None") return nullptr;
  if (d == "True") return true;
  if (d == "False") return false;
  if (a.type == "str") return d;
  try {
    size_t used = 0;
    if (a.type == "int") {
      const long long i = std::stoll(d, &used);
      if (used == d.size()) return i;
    }
    const double x = std::stod(d, &used);
    if (used == d.size()) return x;
  } catch (const std::exception&) {
  }
  return d;
}

// A small valid job, as a merged config (readNeoxYaml's form).
Json baseConfig() {
  return Json{{"num-layers", 2},
              {"hidden-size", 32},
              {"num-attention-heads", 4},
              {"seq-length", 16},
              {"max-position-embeddings", 16},
              {"data-path", "data"},
              {"train-iters", 10},
              {"batch-size", 2},
              {"tokenizer-type", "ByteTokenizer"}};
}

NeoxConfig parseWith(const std::string& key, const Json& value) {
  Json c = baseConfig();
  c[key] = value;
  return parseNeoxConfig(c, 1, MemoryCheck::Elsewhere);
}

}  // namespace

TEST_CASE("neox keys: every argument NeoX documents is known and its default parses", "[neox]") {
  const std::vector<NeoxArgument> args = neoxDocumentedArguments();
  CHECK(args.size() == 297);
  for (const NeoxArgument& a : args) {
    INFO(a.section << " " << a.name << " = " << a.defaultText);
    // NeoX's own names are underscored; the DeepSpeed ones stay so, the others are hyphenated.
    const ConfigKeyOwner owner = configKeyOwner(a.name);
    CHECK(owner != ConfigKeyOwner::Unknown);
    const std::string key = owner == ConfigKeyOwner::DeepSpeed ? a.name : hyphenated(a.name);
    if (baseConfig().contains(key)) continue;  // a required key: its default "None" is "missing"
    try {
      parseWith(key, defaultValue(a));
    } catch (const ds::Error& e) {
      FAIL_CHECK("the documented default was refused: " << e.what());
    }
  }
}

TEST_CASE("neox keys: an unimplemented feature is refused only when switched on", "[neox]") {
  for (const NeoxKeyRule& rule : neoxKeyTable()) {
    if (rule.effect != KeyEffect::NotImplemented) continue;
    const std::string key(rule.name);
    INFO(key);
    // Off: null and each off value parse.
    CHECK_NOTHROW(parseWith(key, nullptr));
    // On: a value of the off value's kind that is not off.
    const bool pathLike = rule.offValues.empty();
    Json on;
    if (pathLike)
      on = "some/path";
    else if (rule.offValues == "false")
      on = true;
    else if (rule.offValues.front() == '"')
      on = "something-else";
    else
      on = 2;
    try {
      parseWith(key, on);
      FAIL_CHECK("switched on and accepted");
    } catch (const ds::Error& e) {
      const std::string message = e.what();
      CHECK_THAT(message, Catch::StartsWith(key + ": " + std::string(rule.note)));
      CHECK_THAT(message, Catch::Contains("not implemented") && Catch::Contains("remove it"));
      // A path-valued key is never told to "set it to false".
      if (pathLike) CHECK_THAT(message, !Catch::Contains("set it to"));
      if (rule.offValues == "false") CHECK_THAT(message, Catch::EndsWith("set it to false"));
    }
  }
}

TEST_CASE("neox keys: no-effect keys are accepted with a note naming the reason", "[neox]") {
  const NeoxConfig c = parseWith("hostfile", "/job/hostfile");
  REQUIRE(c.notes.size() == 1);
  CHECK_THAT(c.notes[0], Catch::StartsWith("hostfile: no effect here") &&
                             Catch::Contains("ds-launch takes --hostfile"));
  CHECK(parseWith("use-wandb", true).notes.at(0) ==
        "use-wandb: Weights & Biases logging is not provided by this build; nothing is sent");
  CHECK(parseWith("use-wandb", false).notes.empty());
}

TEST_CASE("neox keys: the table has each key once, hyphenated", "[neox]") {
  std::set<std::string_view> seen;
  for (const NeoxKeyRule& rule : neoxKeyTable()) {
    INFO(rule.name);
    CHECK(seen.insert(rule.name).second);
    CHECK(rule.name.find('_') == std::string_view::npos);
    CHECK(!rule.note.empty());
  }
}

TEST_CASE("neox keys: lr-decay-fraction and deepspeed-extra-args", "[neox]") {
  const NeoxConfig half = parseWith("lr-decay-fraction", 0.5);
  REQUIRE(half.deepspeed.scheduler);
  CHECK(half.deepspeed.scheduler->neoxAnnealing.decayIters == 5);
  CHECK_THROWS_WITH(parseWith("lr-decay-fraction", 1.5),
                    Catch::Contains("lr-decay-fraction: expected a fraction in (0, 1]"));

  const NeoxConfig extra =
      parseWith("deepspeed-extra-args", Json{{"gradient_accumulation_steps", 3}});
  CHECK(extra.deepspeed.batch.gradientAccumulationSteps == 3);
  Json c = baseConfig();
  c["gradient_accumulation_steps"] = 2;
  c["deepspeed-extra-args"] = Json{{"gradient_accumulation_steps", 3}};
  CHECK_THROWS_WITH(parseNeoxConfig(c, 1, MemoryCheck::Elsewhere),
                    Catch::Contains("deepspeed-extra-args: gradient_accumulation_steps is "
                                    "already set outside deepspeed-extra-args"));
  CHECK_THROWS_WITH(parseWith("deepspeed-extra-args", 3),
                    Catch::Contains("expected a mapping of DeepSpeed keys"));
}

TEST_CASE("neox keys: lr and the optimizer block's lr must agree, as NeoX takes the block's",
          "[neox]") {
  Json c = baseConfig();
  c["optimizer"] = Json{{"type", "Adam"}, {"params", {{"lr", 0.0006}}}};
  c["lr"] = 0.0006;
  CHECK(parseNeoxConfig(c, 1, MemoryCheck::Elsewhere).deepspeed.optimizer->lr() == 0.0006);
  c["lr"] = 0.001;
  CHECK_THROWS_WITH(parseNeoxConfig(c, 1, MemoryCheck::Elsewhere),
                    Catch::Contains("lr: 0.001000 differs from optimizer.params.lr 0.0006"));
}
