// readNeoxYaml / parseNeoxConfig: see neox_config.h. What each NeoX key does is neox_keys.cc's
// table; the handlers of its honoured keys are below.
#include "runtime/config/neox_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <utility>

#include "common/error.h"
#include "common/files.h"
#include "common/json_text.h"
#include "common/printable.h"
#include "runtime/config/auto_value.h"
#include "runtime/config/closest_key.h"
#include "runtime/config/config_policy.h"
#include "runtime/config/gpt_job_memory.h"
#include "runtime/config/neox_attention_config.h"
#include "runtime/config/neox_keys.h"
#include "runtime/data/gpt_samples.h"
#include "runtime/data/utf8.h"

namespace ds::runtime {
namespace {

using Json = nlohmann::json;

constexpr size_t kMaxConfigBytes = size_t{16} << 20;

std::string hyphenated(std::string key) {
  std::replace(key.begin(), key.end(), '_', '-');
  return key;
}
std::string underscored(std::string key) {
  std::replace(key.begin(), key.end(), '-', '_');
  return key;
}

Json scalarToJson(const YAML::Node& node) {
  const std::string& s = node.Scalar();
  if (node.Tag() == "!") return s;  // quoted: a string whatever it looks like
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
  int64_t i = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), i);
  if (ec == std::errc() && end == s.data() + s.size()) return i;
  char* stop = nullptr;
  const double d = std::strtod(s.c_str(), &stop);
  if (stop && *stop == '\0' && s.find_first_not_of("0123456789.eE+-") == std::string::npos)
    return d;
  return s;
}

// yaml-cpp passes any bytes through, but every later step (the JSON the config becomes, the
// DeepSpeed keys' parser, messages quoting a value) needs text, as a JSON config's reader does.
void requireUtf8(const std::string& text, const std::string& what) {
  const Utf8Check check = checkUtf8(text);
  if (check.firstInvalid != text.size())
    throw Error(what + " \"" + printable(replaceInvalidUtf8(text).substr(0, 80)) +
                "\" is not valid UTF-8 (byte " + std::to_string(check.firstInvalid + 1) +
                "); save the file as UTF-8 text");
}

// Values one file may expand to. An alias (*name) is the node its anchor (&name) names, visited
// again: nine nested levels of nine aliases each are 387 million values from twelve lines (the
// "billion laughs"). Real configs have a few hundred.
constexpr size_t kMaxYamlValues = 100000;

struct YamlWalk {
  const std::string& path;  // the file, for messages
  size_t values = 0;
  std::string keyLine = "1";  // the line of the key whose value is being read
};

std::string lineOf(const YAML::Node& node) { return std::to_string(node.Mark().line + 1); }

// `where` is the dotted key path of `node` ("" at the top).
Json yamlToJson(const YAML::Node& node, YamlWalk& walk, const std::string& where, int depth = 0) {
  const std::string at =
      walk.path + ":" + walk.keyLine + ": " + (where.empty() ? "" : where + ": ");
  if (depth > 64) throw Error(at + "nested deeper than 64 levels");
  if (++walk.values > kMaxYamlValues)
    throw Error(at + "the file expands to more than " + std::to_string(kMaxYamlValues) +
                " values (YAML aliases *name repeat what &name names, and nested ones multiply); "
                "write the values out instead of aliasing aliases");
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Scalar:
      requireUtf8(node.Scalar(), at + "the value");
      return scalarToJson(node);
    case YAML::NodeType::Sequence: {
      Json a = Json::array();
      const std::string line = walk.keyLine;  // a map item moves it
      for (const auto& item : node) {
        walk.keyLine = line;
        a.push_back(yamlToJson(item, walk, where, depth + 1));
      }
      return a;
    }
    case YAML::NodeType::Map: {
      Json o = Json::object();
      std::map<std::string, std::string> lines;  // key -> the line it was first given on
      for (const auto& kv : node) {
        walk.keyLine = lineOf(kv.first);
        if (!kv.first.IsScalar())
          throw Error(walk.path + ":" + walk.keyLine + ": " + where + (where.empty() ? "" : ": ") +
                      "a key is not a plain name");
        const std::string& key = kv.first.Scalar();
        requireUtf8(key, walk.path + ":" + walk.keyLine + ": " + where + (where.empty() ? "" : ": ") +
                             "a key");
        const std::string name = where.empty() ? key : where + "." + key;
        // yaml-cpp keeps both; NeoX's yaml.load would silently take the last.
        if (auto [it, first] = lines.emplace(key, walk.keyLine); !first)
          throw Error(walk.path + ":" + walk.keyLine + ": " + name + " is already set on line " +
                      it->second + " of this file; set it once");
        o[key] = yamlToJson(kv.second, walk, name, depth + 1);
      }
      return o;
    }
  }
  return nullptr;
}

std::set<std::string> deepspeedTopLevelKeys() {
  std::set<std::string> keys;
  for (const KeyVerdict& v : configPolicyTable())
    if (v.path.find('.') == std::string::npos) keys.insert(v.path);
  return keys;
}

bool switchedOn(const Json& v) {
  if (v.is_null()) return false;
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number()) return v.get<double>() != 0.0;
  if (v.is_string()) return !v.get<std::string>().empty();
  return !v.empty();
}

// Reading one value of a NeoX key, with the key's name in every message.
struct Reader {
  const Json& merged;
  std::string key;
  const Json& value() const { return merged.at(key); }
  [[noreturn]] void fail(const std::string& expected) const {
    if (isAutoValue(value())) throw Error(key + ": " + autoValueMessage(key));
    throw Error(key + ": expected " + expected + ", got " + value().dump());
  }
  int64_t integer(int64_t lo, int64_t hi) const {
    const Json& v = value();
    double d = 0;
    if (v.is_number_integer())
      d = static_cast<double>(v.get<int64_t>());
    else if (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>())
      d = v.get<double>();
    else
      fail("an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    if (d < static_cast<double>(lo) || d > static_cast<double>(hi))
      fail("an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return static_cast<int64_t>(d);
  }
  double number() const {
    if (!value().is_number() || !std::isfinite(value().get<double>())) fail("a number");
    return value().get<double>();
  }
  bool boolean() const {
    if (!value().is_boolean()) fail("true or false");
    return value().get<bool>();
  }
  std::string string() const {
    if (!value().is_string()) fail("a string");
    return value().get<std::string>();
  }
  // A list of iterations in [0, hi], in any order and with repeats, as NeoX takes it; returned
  // ascending, each once.
  std::vector<int64_t> iterationList(int64_t hi) const {
    const std::string expected =
        "a list of iterations in [0, " + std::to_string(hi) + "], e.g. [0, 500, 2000]";
    if (!value().is_array()) fail(expected);
    std::vector<int64_t> out;
    for (const Json& v : value()) {
      if (v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= hi)
        out.push_back(v.get<int64_t>());
      else
        fail(expected);
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }
  // A list of dataset prefixes; null (NeoX's default) is none.
  std::vector<std::string> pathList() const {
    std::vector<std::string> out;
    if (value().is_null()) return out;
    if (!value().is_array()) fail("a list of dataset prefixes, e.g. [data/a_text_document]");
    for (const Json& v : value()) {
      if (!v.is_string() || v.get<std::string>().empty())
        fail("a list of dataset prefixes, e.g. [data/a_text_document]");
      out.push_back(v.get<std::string>());
    }
    return out;
  }
  // A list of non-negative weights; null (NeoX's default) is equal weights.
  std::vector<double> weightList() const {
    std::vector<double> out;
    if (value().is_null()) return out;
    const std::string expected = "a list of non-negative numbers, one per data path, e.g. [3, 1]";
    if (!value().is_array()) fail(expected);
    for (const Json& v : value()) {
      if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0) fail(expected);
      out.push_back(v.get<double>());
    }
    return out;
  }
  template <class E>
  E choice(const std::vector<std::pair<std::string, E>>& options) const {
    std::string names;
    if (value().is_string())
      for (const auto& [name, e] : options)
        if (name == value().get<std::string>()) return e;
    for (const auto& [name, e] : options) names += (names.empty() ? "" : ", ") + name;
    fail("one of " + names);
  }
};

const std::vector<std::pair<std::string, InitMethod>> kInitMethods = {
    {"normal", InitMethod::Normal},
    {"scaled_normal", InitMethod::ScaledNormal},
    {"small_init", InitMethod::SmallInit},
    {"wang_init", InitMethod::WangInit},
    {"single_residual_scaled_normal", InitMethod::SingleResidualScaledNormal},
    {"xavier_normal", InitMethod::XavierNormal},
    {"xavier_uniform", InitMethod::XavierUniform}};

// init-method / output-layer-init-method: NeoX's orthogonal kinds (a QR factorisation of a
// random matrix) are not implemented; refused by name rather than as an unknown value.
InitMethod readInitMethod(const Reader& r) {
  if (r.value().is_string()) {
    const std::string v = r.value().get<std::string>();
    if (v == "orthogonal" || v == "scaled_orthogonal")
      throw Error(r.key + ": " + v +
                  " (NeoX's QR-based init) is not implemented by this trainer; use normal, "
                  "scaled_normal, single_residual_scaled_normal, small_init, wang_init, "
                  "xavier_normal or xavier_uniform");
  }
  return r.choice(kInitMethods);
}

// The label lists against their data lists. NeoX pairs them by position (zip_longest), so a
// shorter list leaves datasets without labels; and it reads labels for every split once
// train-label-data-paths is set (get_batch's keys), ignoring the other splits' otherwise.
void validateLabelKeys(const GptTrainConfig& t) {
  const bool trainLabels = !t.trainData.labelPaths.empty();
  for (const auto& [split, blend] :
       {std::pair<std::string, const DataBlend*>{"train", &t.trainData},
        {"valid", &t.validData},
        {"test", &t.testData}}) {
    const std::string key = split + "-label-data-paths";
    const size_t labels = blend->labelPaths.size(), paths = blend->paths.size();
    if (labels > 0 && labels != paths)
      throw Error(key + ": " + std::to_string(labels) + " label datasets for the " +
                  std::to_string(paths) + " of " + split +
                  "-data-paths; give one label dataset per data path, in the same order");
    if (labels > 0 && !trainLabels)
      throw Error(key +
                  ": NeoX reads label datasets only when train-label-data-paths is set and "
                  "would ignore these; set train-label-data-paths too, or remove " +
                  key);
    if (trainLabels && labels == 0 && paths > 0)
      throw Error(key + ": required with train-label-data-paths when " + split +
                  "-data-paths is not empty (NeoX reads a label for every sample of every "
                  "split once training has labels); give one label dataset per " +
                  split + "-data-paths entry");
  }
}

// NeoX's rules for data-path against the per-split lists (NeoXArgs.validate_values): one or the
// other; all three lists or none; weights as many as paths.
void validateDataKeys(const Json& merged, GptTrainConfig& t) {
  auto given = [&](const char* key) { return merged.contains(key) && !merged[key].is_null(); };
  const bool lists =
      given("train-data-paths") || given("valid-data-paths") || given("test-data-paths");
  if (!lists) {
    for (const auto& [key, blend] :
         {std::pair<const char*, const DataBlend*>{"train-label-data-paths", &t.trainData},
          {"valid-label-data-paths", &t.validData},
          {"test-label-data-paths", &t.testData}})
      if (!blend->labelPaths.empty())
        throw Error(std::string(key) +
                    ": label datasets pair with train-/valid-/test-data-paths (NeoX reads none "
                    "with data-path); list the datasets per split or remove the labels");
    for (const char* key : {"train-data-weights", "valid-data-weights", "test-data-weights"})
      if (given(key))
        throw Error(std::string(key) + ": weights the datasets of " +
                    std::string(key).substr(0, std::string(key).find("-weights")) +
                    "-paths, which is not set; set the paths or remove the weights");
    if (t.dataPath.empty())
      throw Error(
          "data-path: required (an indexed dataset prefix; make one with ds-preprocess), "
          "or train-data-paths, valid-data-paths and test-data-paths");
    return;
  }
  if (!t.dataPath.empty())
    throw Error(
        "data-path: set together with train-/valid-/test-data-paths; NeoX takes either "
        "data-path (cut by split) or the per-split lists, not both: remove one");
  for (const char* key : {"train-data-paths", "valid-data-paths", "test-data-paths"})
    if (!given(key))
      throw Error(std::string(key) +
                  ": required with the other per-split data paths (NeoX "
                  "takes all three lists or none; an empty list [] is a split with no data)");
  if (t.trainData.paths.empty())
    throw Error("train-data-paths: expected at least one dataset prefix, got []");
  validateDataBlend(t.trainData, "train");
  validateDataBlend(t.validData, "valid");
  validateDataBlend(t.testData, "test");
  validateLabelKeys(t);
}

}  // namespace

std::vector<std::string> GptTrainConfig::dataPrefixes() const {
  if (!blended()) return {dataPath};
  std::vector<std::string> out;
  for (const DataBlend* b : {&trainData, &validData, &testData})
    out.insert(out.end(), b->paths.begin(), b->paths.end());
  return out;
}

bool isNeoxConfigPath(const std::string& path) {
  auto endsWith = [&](const std::string& s) {
    return path.size() >= s.size() && path.compare(path.size() - s.size(), s.size(), s) == 0;
  };
  return endsWith(".yml") || endsWith(".yaml");
}

ConfigKeyOwner configKeyOwner(const std::string& key) {
  static const std::set<std::string> dsKeys = deepspeedTopLevelKeys();
  if (dsKeys.count(underscored(key))) return ConfigKeyOwner::DeepSpeed;
  if (findNeoxKey(hyphenated(key))) return ConfigKeyOwner::Neox;
  return ConfigKeyOwner::Unknown;
}

Json readNeoxYaml(const std::vector<std::string>& paths) {
  if (paths.empty()) throw Error("no NeoX config file given");
  const std::set<std::string> dsKeys = deepspeedTopLevelKeys();
  Json merged = Json::object();
  std::map<std::string, std::string> origin;  // normalised key -> the file that set it
  for (const std::string& path : paths) {
    const std::string text = readWholeFile(path, "NeoX config", kMaxConfigBytes);
    YAML::Node root;
    try {
      root = YAML::Load(text);
    } catch (const YAML::Exception& e) {
      throw Error(path + ":" + std::to_string(e.mark.line + 1) + ": not valid YAML: " + e.msg);
    }
    if (root.IsNull()) continue;
    if (!root.IsMap()) throw Error(path + ": expected a mapping of config keys at the top level");
    YamlWalk walk{path};
    Json doc = yamlToJson(root, walk, "");
    // A deepspeed_config JSON file contributes its keys as if written inline.
    for (const char* spelling : {"deepspeed_config", "deepspeed-config"}) {
      if (!doc.contains(spelling)) continue;
      const Json ref = doc[spelling];
      doc.erase(spelling);
      if (!ref.is_string()) throw Error(path + ": " + spelling + ": expected a JSON file path");
      const std::string jsonPath = ref.get<std::string>();
      const Json ds =
          parseJsonText(readWholeFile(jsonPath, "DeepSpeed config", kMaxConfigBytes), jsonPath);
      if (!ds.is_object()) throw Error(jsonPath + ": expected a JSON object");
      for (auto& [k, v] : ds.items()) {
        if (doc.contains(k))
          throw Error(path + ": " + k + " is set both inline and in " + jsonPath);
        doc[k] = v;
      }
    }
    for (auto& [key, value] : doc.items()) {
      const std::string normal =
          dsKeys.count(underscored(key)) ? underscored(key) : hyphenated(key);
      if (auto it = origin.find(normal); it != origin.end())
        throw Error(path + ": " + key + " is already set by " + it->second +
                    " (NeoX merges files without overriding: set each key in one file)");
      origin[normal] = path;
      merged[normal] = value;
    }
  }
  return merged;
}

namespace {

// The bound of the counts NeoX keys give: iterations, intervals, batch sizes, the seed.
constexpr int64_t kMaxCount = int64_t{1} << 40;
// The bound of a model size or parallel degree (GptConfig::validate judges how sizes combine).
constexpr int64_t kMaxSize = 1 << 20;

const std::vector<std::pair<std::string, PositionEmbedding>> kPositionEmbeddings = {
    {"learned", PositionEmbedding::Learned},
    {"sinusoidal", PositionEmbedding::Sinusoidal},
    {"rotary", PositionEmbedding::Rotary},
    {"none", PositionEmbedding::None}};

const std::vector<std::pair<std::string, NormKind>> kNorms = {
    {"layernorm", NormKind::LayerNorm},
    {"rmsnorm", NormKind::RmsNorm},
    {"scalenorm", NormKind::ScaleNorm}};

const std::vector<std::pair<std::string, Activation>> kActivations = {
    {"gelu", Activation::Gelu},       {"softsign", Activation::Softsign},
    {"mish", Activation::Mish},       {"geglu", Activation::Geglu},
    {"relu", Activation::Relu},       {"silu", Activation::Silu},
    {"swish", Activation::Silu},      {"reglu", Activation::Reglu},
    {"swiglu", Activation::Swiglu},   {"glu", Activation::Glu},
    {"bilinear", Activation::Bilinear}};

// The model keys that set one field as they are: sizes in [1, kMaxSize], numbers, switches.
const std::pair<std::string_view, int GptConfig::*> kModelSizes[] = {
    {"num-layers", &GptConfig::numLayers},
    {"hidden-size", &GptConfig::hiddenSize},
    {"num-attention-heads", &GptConfig::numAttentionHeads},
    {"seq-length", &GptConfig::seqLength},
    {"max-position-embeddings", &GptConfig::maxPositionEmbeddings},
    {"intermediate-size", &GptConfig::intermediateSize},
    {"mlp-multiple-of", &GptConfig::mlpMultipleOf},
    {"num-kv-heads", &GptConfig::numKvHeads},
    {"make-vocab-size-divisible-by", &GptConfig::makeVocabSizeDivisibleBy}};
const std::pair<std::string_view, double GptConfig::*> kModelNumbers[] = {
    {"rotary-pct", &GptConfig::rotaryPct},
    {"rotary-emb-base", &GptConfig::rotaryEmbBase},
    {"layernorm-epsilon", &GptConfig::layernormEpsilon},
    {"rms-norm-epsilon", &GptConfig::rmsNormEpsilon},
    {"scalenorm-epsilon", &GptConfig::scalenormEpsilon},
    {"attention-dropout", &GptConfig::attentionDropout},
    {"hidden-dropout", &GptConfig::hiddenDropout},
    {"init-method-std", &GptConfig::initMethodStd}};
const std::pair<std::string_view, bool GptConfig::*> kModelSwitches[] = {
    {"use-bias-in-norms", &GptConfig::biasInNorms},
    {"use-bias-in-attn-linear", &GptConfig::biasInAttnLinear},
    {"use-bias-in-mlp", &GptConfig::biasInMlp},
    {"gpt-j-residual", &GptConfig::gptjResidual},
    {"gpt-j-tied", &GptConfig::gptjTied},
    {"use-qk-layernorm", &GptConfig::qkNorm},
    {"checkpoint-activations", &GptConfig::checkpointActivations}};

// Iteration counts and intervals, each an integer in [min, kMaxCount].
struct CountField {
  int64_t GptTrainConfig::*field;
  int64_t min;
};
const std::pair<std::string_view, CountField> kIterationCounts[] = {
    {"train-iters", {&GptTrainConfig::trainIters, 1}},
    {"log-interval", {&GptTrainConfig::logInterval, 1}},
    {"eval-interval", {&GptTrainConfig::evalInterval, 1}},
    {"eval-iters", {&GptTrainConfig::evalIters, 0}},
    {"save-interval", {&GptTrainConfig::saveInterval, 0}},
    {"exit-interval", {&GptTrainConfig::exitInterval, 1}}};

// NeoX's names for the fp16 block's numbers.
const std::pair<std::string_view, const char*> kFp16Numbers[] = {
    {"loss-scale", "loss_scale"},
    {"loss-scale-window", "loss_scale_window"},
    {"hysteresis", "hysteresis"},
    {"min-scale", "min_loss_scale"}};

// What `table` pairs with `key`, or null.
template <class T, size_t N>
const T* lookup(const std::pair<std::string_view, T> (&table)[N], std::string_view key) {
  for (const auto& [name, value] : table)
    if (name == key) return &value;
  return nullptr;
}

// What the NeoX keys set besides the model and training config: the DeepSpeed config they map
// to, and the keys judged together once every key is read (the lr schedule, save-iters,
// attention-config).
struct NeoxKeys {
  NeoxConfig out;
  Json ds = Json::object();
  std::optional<double> lr;
  std::optional<std::string> decayStyle;
  std::optional<int64_t> decayIters;
  std::optional<double> decayFraction;  // NeoX: overrides lr-decay-iters
  double warmup = 0.01, minLr = 0.0;
  std::optional<Json> saveIters;  // judged once the schedule it is derived from is known
  Json attentionConfig;           // null: NeoX's default, global attention in every layer

  GptTrainConfig& train() { return out.train; }
  Json& optimizerParams() {
    if (!ds.contains("optimizer")) ds["optimizer"] = {{"type", "Adam"}, {"params", Json::object()}};
    if (!ds["optimizer"].is_object()) throw Error("optimizer: expected an object");
    return ds["optimizer"]["params"];
  }
  Json& fp16() {
    if (!ds.contains("fp16")) ds["fp16"] = Json::object();
    return ds["fp16"];
  }
};

// DeepSpeed keys first: NeoX keys read later may add to their blocks. A null is NeoX's "not set"
// (its documented default for most of them).
void collectDeepSpeedKeys(const Json& merged, const std::set<std::string>& dsKeys, NeoxKeys& k) {
  Json& ds = k.ds;
  for (auto& [key, value] : merged.items())
    if (dsKeys.count(key) && key != "activation_checkpointing" && !value.is_null()) ds[key] = value;
  // deepspeed-extra-args: DeepSpeed keys NeoX has no argument for, merged as NeoX does (a key
  // also given elsewhere is an error there too).
  if (merged.contains("deepspeed-extra-args") && !merged["deepspeed-extra-args"].is_null()) {
    const Json& extra = merged["deepspeed-extra-args"];
    if (!extra.is_object())
      throw Error("deepspeed-extra-args: expected a mapping of DeepSpeed keys, got " +
                  extra.dump());
    for (auto& [key, value] : extra.items()) {
      if (ds.contains(key) || merged.contains(key))
        throw Error("deepspeed-extra-args: " + key +
                    " is already set outside deepspeed-extra-args; set it once");
      ds[key] = value;
    }
  }

  // DeepSpeed-Ulysses' degree: the GPT trainer's topology key (its ranks share each sample's
  // positions), not one of the engine's, which DeepSpeed's config parser refuses above 1.
  if (ds.contains("sequence_parallel_size")) {
    const Json& v = ds["sequence_parallel_size"];
    if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > kMaxSize)
      throw Error("sequence_parallel_size: expected an integer >= 1, got " + v.dump());
    k.train().parallel.sequence = v.get<int>();
    ds.erase("sequence_parallel_size");
  }

  // fp16.auto_cast casts a module's floating-point inputs to fp16; the GPT's inputs are token ids.
  if (ds.contains("fp16") && ds["fp16"].is_object() && ds["fp16"].contains("auto_cast")) {
    if (switchedOn(ds["fp16"]["auto_cast"]))
      k.out.notes.push_back(
          "fp16.auto_cast: no effect here (it casts floating-point module inputs "
          "to fp16, and the GPT's inputs are token ids)");
    ds["fp16"].erase("auto_cast");
  }
}

// Whether a handler below is to read the key's value. Unknown keys are refused (naming the
// nearest), no-effect and observer keys noted, unimplemented features refused where switched on;
// a null is NeoX's None (not set: the key's default applies).
bool honouredAndSet(const std::string& key, const Json& value,
                    const std::vector<std::string_view>& candidates,
                    std::vector<std::string>& notes) {
  const NeoxKeyRule* rule = findNeoxKey(key);
  if (!rule) {
    const std::string near = closestKey(key, candidates);
    throw Error(key + ": unknown NeoX or DeepSpeed config key" +
                (near.empty() ? std::string() : "; did you mean \"" + near + "\"?"));
  }
  if (rule->effect == KeyEffect::NoEffect) {
    notes.push_back(key + ": no effect here (" + std::string(rule->note) + ")");
    return false;
  }
  if (rule->effect == KeyEffect::Observer) {
    if (!neoxKeyIsOff(*rule, value))
      notes.push_back(key + ": " + std::string(rule->note) +
                      " is not provided by this build; nothing is sent");
    return false;
  }
  if (rule->effect == KeyEffect::NotImplemented) {
    if (!neoxKeyIsOff(*rule, value)) throw Error(neoxKeyRefusal(*rule, value));
    return false;
  }
  return !value.is_null();
}

// Each reader below takes the keys of one topic and returns false for any other key.

// The model's shape and options.
bool readModelKey(const std::string& key, const Reader& r, NeoxKeys& k) {
  GptConfig& m = k.train().model;
  if (const auto size = lookup(kModelSizes, key))
    m.*(*size) = static_cast<int>(r.integer(1, kMaxSize));
  else if (const auto number = lookup(kModelNumbers, key))
    m.*(*number) = r.number();
  else if (const auto on = lookup(kModelSwitches, key))
    m.*(*on) = r.boolean();
  else if (key == "pos-emb")
    m.posEmb = r.choice(kPositionEmbeddings);
  else if (key == "sinusoidal-pos-emb") {
    if (r.boolean()) m.posEmb = PositionEmbedding::Sinusoidal;
  } else if (key == "norm")
    m.norm = r.choice(kNorms);
  else if (key == "rms-norm") {
    if (r.boolean()) m.norm = NormKind::RmsNorm;
  } else if (key == "activation")
    m.activation = r.choice(kActivations);
  else if (key == "geglu") {
    if (r.boolean()) m.activation = Activation::Geglu;
  } else if (key == "no-weight-tying")
    m.weightTying = !r.boolean();
  else if (key == "init-method")
    m.initMethod = readInitMethod(r);
  else if (key == "output-layer-init-method")
    m.outputLayerInitMethod = readInitMethod(r);
  else if (key == "sliding-window-width")
    m.slidingWindowWidth = static_cast<int>(r.integer(0, 1 << 30));
  else if (key == "attention-config")
    k.attentionConfig = r.value();  // expanded once num-layers is known
  else if (key == "expansion-factor") {
    m.expansionFactor = r.number();
    if (m.expansionFactor <= 0) r.fail("a positive number or null");
  } else
    return false;
  return true;
}

// Mixture of experts (runtime/model/moe_config.h).
bool readMoeKey(const std::string& key, const Reader& r, GptTrainConfig& t) {
  MoeConfig& m = t.model.moe;
  if (key == "moe-num-experts")
    m.numExperts = static_cast<int>(r.integer(1, 1 << 16));
  else if (key == "moe-expert-interval")
    m.expertInterval = static_cast<int>(r.integer(1, kMaxSize));
  else if (key == "moe-top-k")
    m.topK = static_cast<int>(r.integer(1, 1 << 16));
  else if (key == "moe-type")
    m.kind =
        r.choice<MoeKind>({{"megablocks", MoeKind::Dropless}, {"deepspeed", MoeKind::DeepSpeed}});
  else if (key == "moe-router-type")
    m.router = r.choice<MoeRouter>({{"sinkhorn", MoeRouter::Sinkhorn}, {"topk", MoeRouter::TopK}});
  else if (key == "moe-jitter-eps")
    m.jitterEps = r.number();
  else if (key == "moe-loss-coeff")
    m.lossCoeff = r.number();
  else if (key == "moe-train-capacity-factor")
    m.trainCapacityFactor = r.number();
  else if (key == "moe-eval-capacity-factor")
    m.evalCapacityFactor = r.number();
  else if (key == "moe-min-capacity")
    m.minCapacity = static_cast<int>(r.integer(0, kMaxSize));
  else if (key == "moe-token-dropping")
    m.tokenDropping = r.boolean();
  else if (key == "moe-use-residual")
    m.useResidual = r.boolean();
  else if (key == "moe-expert-parallel-size")
    t.parallel.expert = m.expertParallelSize = static_cast<int>(r.integer(1, kMaxSize));
  else if (key == "moe-noisy-gate-policy")
    m.noisyGate = r.choice<NoisyGate>({{"None", NoisyGate::None},
                                       {"Jitter", NoisyGate::Jitter},
                                       {"RSample", NoisyGate::RSample}});
  else if (key == "moe-use-rts")
    m.useRts = r.boolean();
  else
    return false;
  return true;
}

// Model and pipeline parallelism, and what they do to checkpointed activations.
bool readParallelKey(const std::string& key, const Reader& r, GptTrainConfig& t) {
  GptConfig& m = t.model;
  if (key == "pipe-parallel-size")
    t.parallel.pipe = std::max(1, static_cast<int>(r.integer(0, kMaxSize)));  // NeoX: 0 is 1
  else if (key == "model-parallel-size")
    t.parallel.model = static_cast<int>(r.integer(1, kMaxSize));
  else if (key == "output-layer-parallelism") {
    // NeoX accepts "column" alone (its Literal; row is broken upstream, its issue 905): the
    // head split by vocabulary rows, as the vocabulary-parallel cross-entropy here does.
    if (const std::string kind = r.string(); kind != "column")
      throw Error("output-layer-parallelism: \"" + kind +
                  "\" is not implemented; only \"column\" (the output layer split over the "
                  "vocabulary, NeoX's only accepted value)");
  } else if (key == "pipe-partition-method") {
    t.parallel.partitionMethod = r.string();
    checkPartitionMethod(t.parallel.partitionMethod);
  } else if (key == "sequence-parallel") {
    m.sequenceParallel = r.boolean();
  } else if (key == "partition-activations" || key == "distribute-checkpointed-activations")
    m.partitionActivations = m.partitionActivations || r.boolean();
  else if (key == "checkpoint-num-layers") {
    if (r.integer(1, kMaxSize) != 1)
      throw Error("checkpoint-num-layers: only 1 (every layer a checkpoint) is implemented");
  } else
    return false;
  return true;
}

// The datasets, how they blend and split, and the tokenizer.
bool readDataKey(const std::string& key, const Reader& r, GptTrainConfig& t) {
  if (key == "data-path")
    t.dataPath = r.string();
  else if (key == "train-data-paths")
    t.trainData.paths = r.pathList();
  else if (key == "valid-data-paths")
    t.validData.paths = r.pathList();
  else if (key == "test-data-paths")
    t.testData.paths = r.pathList();
  else if (key == "train-label-data-paths")
    t.trainData.labelPaths = r.pathList();
  else if (key == "valid-label-data-paths")
    t.validData.labelPaths = r.pathList();
  else if (key == "test-label-data-paths")
    t.testData.labelPaths = r.pathList();
  else if (key == "train-data-weights")
    t.trainData.weights = r.weightList();
  else if (key == "valid-data-weights")
    t.validData.weights = r.weightList();
  else if (key == "test-data-weights")
    t.testData.weights = r.weightList();
  else if (key == "weight-by-num-documents")
    t.blend.weightByNumDocuments = r.boolean();
  else if (key == "weighted-sampler-alpha") {
    t.blend.alpha = r.number();
    if (!(t.blend.alpha >= 0.0)) r.fail("a number >= 0 (1 samples in proportion to documents)");
  } else if (key == "split")
    t.split = r.string();
  else if (key == "tokenizer-type")
    t.tokenizerType = r.string();
  else if (key == "vocab-file")
    t.vocabFile = r.string();
  else if (key == "merge-file")
    t.mergeFile = r.string();
  else
    return false;
  return true;
}

// The run's length, intervals and seed, and the lr schedule's keys.
bool readRunKey(const std::string& key, const Reader& r, NeoxKeys& k) {
  GptTrainConfig& t = k.train();
  if (const auto count = lookup(kIterationCounts, key))
    t.*(count->field) = r.integer(count->min, kMaxCount);
  else if (key == "seed")
    t.seed = static_cast<uint64_t>(r.integer(0, kMaxCount));
  else if (key == "lr-decay-style")
    k.decayStyle = r.string();
  else if (key == "lr-decay-iters")
    k.decayIters = r.integer(1, kMaxCount);
  else if (key == "min-lr")
    k.minLr = r.number();
  else if (key == "warmup")
    k.warmup = r.number();
  else if (key == "lr")
    k.lr = r.number();
  else if (key == "lr-decay-fraction") {
    k.decayFraction = r.number();
    if (!(*k.decayFraction > 0.0 && *k.decayFraction <= 1.0)) r.fail("a fraction in (0, 1]");
  } else if (key == "override-lr-scheduler") {
    r.boolean();  // the config's schedule always applies on resume here
  } else
    return false;
  return true;
}

// Where checkpoints are saved, when, how many are kept, and what a load takes.
bool readCheckpointKey(const std::string& key, const Reader& r, NeoxKeys& k) {
  GptTrainConfig& t = k.train();
  if (key == "save")
    t.save = r.string();
  else if (key == "checkpoint-factor")
    t.checkpoints.factor = r.number();
  else if (key == "checkpoint-scale")
    t.checkpoints.scale = r.choice<CheckpointScale>(
        {{"linear", CheckpointScale::Linear}, {"log", CheckpointScale::Log}});
  else if (key == "extra-save-iters")
    t.checkpoints.extraSaveIters = r.iterationList(kMaxCount);
  else if (key == "keep-last-n-checkpoints")
    t.checkpoints.keepLast = r.integer(1, kMaxCount);
  else if (key == "save-iters")
    k.saveIters = r.value();
  else if (key == "load")
    t.load = r.string();
  else if (key == "finetune")
    t.finetune = r.boolean();
  else if (key == "no-load-optim")
    t.noLoadOptim = r.boolean();
  else
    return false;
  return true;
}

// NeoX's names for DeepSpeed settings, written into the DeepSpeed config its own parser reads.
bool readDeepSpeedKey(const std::string& key, const Reader& r, NeoxKeys& k) {
  Json& ds = k.ds;
  if (const auto fp16Key = lookup(kFp16Numbers, key))
    k.fp16()[*fp16Key] = r.number();
  else if (key == "weight-decay")
    k.optimizerParams()["weight_decay"] = r.number();
  else if (key == "adam-beta1" || key == "adam-beta2") {
    Json& p = k.optimizerParams();
    if (!p.contains("betas")) p["betas"] = {0.9, 0.999};
    p["betas"][key == "adam-beta1" ? 0 : 1] = r.number();
  } else if (key == "adam-eps")
    k.optimizerParams()["eps"] = r.number();
  else if (key == "clip-grad")
    ds["gradient_clipping"] = r.number();
  else if (key == "precision") {
    const std::string p = r.string();
    if (p == "fp16")
      k.fp16()["enabled"] = true;
    else if (p == "bfloat16" || p == "bf16")
      ds["bf16"] = {{"enabled", true}};
    else if (p != "fp32")
      r.fail("fp16, bfloat16 or fp32");
  } else if (key == "batch-size")
    ds["train_micro_batch_size_per_gpu"] = r.integer(1, kMaxCount);
  else if (key == "fp32-allreduce")
    ds["fp32_allreduce"] = r.boolean();
  else if (key == "tensorboard-dir")
    ds["tensorboard"] = {{"enabled", true}, {"output_path", r.string()}};
  else if (key == "deepspeed-extra-args" || key == "deepspeed-config") {
    // Read with the DeepSpeed keys, by collectDeepSpeedKeys.
  } else
    return false;
  return true;
}

// Every NeoX key, in the merged object's (sorted) order, so that the first bad key is the first
// one reported.
void readNeoxKeys(const Json& merged, const std::set<std::string>& dsKeys, NeoxKeys& k) {
  std::vector<std::string_view> candidates;
  for (const NeoxKeyRule& rule : neoxKeyTable()) candidates.push_back(rule.name);
  for (const auto& key : dsKeys) candidates.push_back(key);
  for (auto& [key, value] : merged.items()) {
    if (dsKeys.count(key) || !honouredAndSet(key, value, candidates, k.out.notes)) continue;
    const Reader r{merged, key};
    if (!readModelKey(key, r, k) && !readMoeKey(key, r, k.train()) &&
        !readParallelKey(key, r, k.train()) && !readDataKey(key, r, k.train()) &&
        !readRunKey(key, r, k) && !readCheckpointKey(key, r, k) && !readDeepSpeedKey(key, r, k))
      throw Error(key +
                  ": the key table (neox_keys.cc) says it is honoured but it has no "
                  "handler; this is a bug in ds-launch");
  }
}

// DeepSpeed's activation_checkpointing block: settings of the recomputation NeoX's
// checkpoint-activations switches on; partition_activations is NeoX's partition-activations.
void readActivationCheckpointing(const Json& merged, GptConfig& m) {
  if (!merged.contains("activation_checkpointing") || merged["activation_checkpointing"].is_null())
    return;
  const Json& block = merged["activation_checkpointing"];
  if (!block.is_object()) throw Error("activation_checkpointing: expected an object");
  for (auto& [k, v] : block.items()) {
    static const std::set<std::string> known = {
        "partition_activations", "contiguous_memory_optimization",  "cpu_checkpointing",
        "number_checkpoints",    "synchronize_checkpoint_boundary", "profile"};
    if (!known.count(k)) throw Error("activation_checkpointing." + k + ": unknown key");
    if (k == "partition_activations" && switchedOn(v)) m.partitionActivations = true;
  }
}

// DeepSpeed-Ulysses' limits here: with data parallelism and ZeRO only, heads and kv heads split
// over the sequence ranks, every sample's positions too.
void checkUlysses(const GptTrainConfig& t) {
  const int u = t.parallel.sequence;
  if (u == 1) return;
  const std::string size = "sequence_parallel_size " + std::to_string(u);
  if (t.parallel.model > 1 || t.parallel.pipe > 1)
    throw Error(size + ": not implemented with model-parallel-size or pipe-parallel-size above 1 "
                "(DeepSpeed-Ulysses composes with data parallelism and ZeRO here); set them to 1");
  if (t.model.sequenceParallel)
    throw Error(size + ": with sequence-parallel (Megatron's, which needs model-parallel-size > 1);"
                " use one of them");
  auto evenly = [&](const std::string& key, int64_t n) {
    if (n % u != 0)
      throw Error(size + ": " + key + " " + std::to_string(n) +
                  " does not divide by it (each sequence rank attends with 1/" +
                  std::to_string(u) + " of the heads over 1/" + std::to_string(u) +
                  " of each sample's positions); use a divisor of " + std::to_string(n));
  };
  evenly("num-attention-heads", t.model.numAttentionHeads);
  evenly("num-kv-heads", t.model.kvHeads());
  evenly("seq-length", t.model.seqLength);
}

// A misspelt tokenizer name, an impossible model or one its model-parallel ranks cannot split
// fails at launch, not on every rank after its start.
void checkModel(const NeoxKeys& k) {
  const GptTrainConfig& t = k.out.train;
  parseTokenizerType(t.tokenizerType);
  checkSlidingWindow(expandAttentionConfig(k.attentionConfig, t.model.numLayers),
                     t.model.slidingWindowWidth);
  t.model.validate();
  t.model.validateModelParallel(t.parallel.model);
  checkUlysses(t);
  if (t.trainIters <= 0) throw Error("train-iters: required (the number of optimizer steps)");
}

void checkCheckpointKeys(NeoxKeys& k) {
  const GptTrainConfig& t = k.out.train;
  validateCheckpointSchedule(t.checkpoints);
  if (t.checkpoints.periodic() && t.saveInterval > 0)
    throw Error(
        "save-interval: NeoX's old name for checkpoint-factor (with checkpoint-scale "
        "linear); set one of them, not both");
  // NeoX derives save_iters from the keys above and overwrites any value given for it (newer
  // NeoX has no such key at all); configs NeoX dumped from a run carry it.
  if (k.saveIters && switchedOn(*k.saveIters)) {
    if (!t.checkpoints.periodic() && t.checkpoints.extraSaveIters.empty())
      throw Error(
          "save-iters: NeoX computes this list itself and ignores a value given here; "
          "to save at chosen iterations list them in extra-save-iters, or set "
          "checkpoint-factor (and checkpoint-scale) for periodic saves");
    k.out.notes.push_back(
        "save-iters: no effect (derived from checkpoint-factor, checkpoint-scale and "
        "extra-save-iters, as in NeoX)");
  }
}

// The DeepSpeed keys NeoX's keys imply or require: the optimizer's lr, a batch size, and
// steps_per_print from log-interval; a scheduler block is refused.
void completeDeepSpeedKeys(NeoxKeys& k) {
  Json& ds = k.ds;
  if (ds.contains("scheduler"))
    throw Error(
        "scheduler: the NeoX trainer schedules the lr itself (lr-decay-style, warmup, "
        "min-lr); remove the scheduler block");
  if (k.lr) {
    // NeoX takes the optimizer block's lr and overwrites this key with it: two different values
    // would train differently here and there.
    Json& params = k.optimizerParams();
    if (params.contains("lr") && params["lr"].is_number() && params["lr"].get<double>() != *k.lr)
      throw Error("lr: " + std::to_string(*k.lr) + " differs from optimizer.params.lr " +
                  params["lr"].dump() +
                  " (NeoX uses the optimizer block's and ignores this key); set one of them");
    params["lr"] = *k.lr;
  }
  // A mistyped "enabled" is left to the DeepSpeed keys' parser, which names it.
  const bool elastic = ds.contains("elasticity") && ds["elasticity"].is_object() &&
                       ds["elasticity"].contains("enabled") &&
                       ds["elasticity"]["enabled"].is_boolean() &&
                       ds["elasticity"]["enabled"].get<bool>();
  if (!elastic && !ds.contains("train_micro_batch_size_per_gpu") &&
      !ds.contains("train_batch_size"))
    throw Error(
        "batch-size (or train_micro_batch_size_per_gpu): required (or an enabled "
        "elasticity block, which computes it)");
  if (!ds.contains("steps_per_print")) ds["steps_per_print"] = k.out.train.logInterval;
}

// DeepSpeed's config with NeoX's mpu: the batch rules divide by the data-parallel size.
void parseDeepSpeedKeys(NeoxKeys& k, int64_t worldSize) {
  const GptTrainConfig& t = k.out.train;
  const int64_t world =
      worldSize == kOneReplica ? t.parallel.sampleRanks() * t.parallel.expert : worldSize;
  DeepSpeedConfig& deepspeed = k.out.deepspeed;
  deepspeed = parseDeepSpeedConfig(k.ds.dump(), dataParallelSize(t.parallel, world),
                                   "NeoX config (DeepSpeed keys)", t.parallel.replicaRanks());
  // An elastic restart picks worlds by pipe x model alone; a world that splits no sample stream
  // over the sequence ranks would fail only then.
  if (t.parallel.sequence > 1 && deepspeed.elasticity.enabled)
    throw Error("sequence_parallel_size " + std::to_string(t.parallel.sequence) +
                ": not implemented with elasticity (the elastic worlds do not keep whole "
                "sequence groups); disable one of them");
  // DeepSpeed's PipelineEngine asserts zero_optimization_stage() < 2 (ZeroStageEnum.gradients).
  if (t.parallel.pipe > 1 && deepspeed.zero.stage >= 2)
    throw Error("zero_optimization.stage " + std::to_string(deepspeed.zero.stage) +
                ": ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism "
                "(pipe-parallel-size " +
                std::to_string(t.parallel.pipe) + "), as in DeepSpeed; use stage 0 or 1");
  if (deepspeed.optimizer) {
    checkOptimizerModelParallel(*deepspeed.optimizer, t.parallel.model);
    checkOneBitLayout(*deepspeed.optimizer, deepspeed.zero.stage, t.parallel.pipe, t.parallel.model,
                      t.model.moe.enabled());
  }
  // The flops profiler times one micro-batch's forward of the whole model; a stage holds part of
  // it and interleaves micro-batches.
  if (t.parallel.pipe > 1 && deepspeed.flopsProfiler.enabled)
    throw Error("flops_profiler: not supported with pipe-parallel-size " +
                std::to_string(t.parallel.pipe) +
                " (a stage holds only its layers); disable it or set pipe-parallel-size to 1");
}

// NeoX's annealing lr schedule from its keys, with the optimizer's lr as its peak.
SchedulerConfig annealingSchedule(const NeoxKeys& k) {
  if (!(k.warmup >= 0.0 && k.warmup <= 1.0))
    throw Error("warmup: expected a fraction of lr-decay-iters in [0, 1], got " +
                std::to_string(k.warmup));
  const int64_t trainIters = k.out.train.trainIters;
  SchedulerConfig schedule;
  schedule.type = SchedulerType::NeoxAnnealing;
  NeoxAnnealingParams& a = schedule.neoxAnnealing;
  a.maxLr = k.out.deepspeed.optimizer ? k.out.deepspeed.optimizer->lr() : OptimizerConfig{}.lr();
  a.minLr = k.minLr;
  a.decayIters =
      k.decayFraction
          ? std::max<int64_t>(1, static_cast<int64_t>(std::floor(*k.decayFraction * trainIters)))
          : k.decayIters.value_or(trainIters);
  a.warmupIters = static_cast<int64_t>(k.warmup * static_cast<double>(a.decayIters));
  const std::string style = k.decayStyle.value_or("linear");
  if (style == "linear")
    a.style = LrDecayStyle::Linear;
  else if (style == "cosine")
    a.style = LrDecayStyle::Cosine;
  else if (style == "constant")
    a.style = LrDecayStyle::Constant;
  else
    throw Error("lr-decay-style: expected linear, cosine or constant, got \"" + style + "\"");
  if (k.minLr < 0 || k.minLr > a.maxLr)
    throw Error("min-lr: expected 0..lr (" + std::to_string(a.maxLr) + "), got " +
                std::to_string(k.minLr));
  return schedule;
}

}  // namespace

NeoxConfig parseNeoxConfig(const Json& merged, int64_t worldSize, MemoryCheck memory) {
  if (!merged.is_object()) throw Error("NeoX config: expected an object");
  const std::set<std::string> dsKeys = deepspeedTopLevelKeys();
  NeoxKeys k;
  collectDeepSpeedKeys(merged, dsKeys, k);
  readNeoxKeys(merged, dsKeys, k);
  const GptTrainConfig& t = k.out.train;
  readActivationCheckpointing(merged, k.train().model);
  checkModel(k);
  if (t.model.sequenceParallel && t.parallel.model == 1)
    k.out.notes.push_back("sequence-parallel: no effect at model-parallel-size 1 (as in NeoX)");
  checkCheckpointKeys(k);
  validateDataKeys(merged, k.train());
  if (!t.testData.paths.empty())
    k.out.notes.push_back(
        "test-data-paths: read by ds-config check only; this trainer runs no "
        "test-split evaluation (nor for split's third part)");
  completeDeepSpeedKeys(k);
  parseDeepSpeedKeys(k, worldSize);
  // What every rank would otherwise find out for itself, after its start: a split it cannot cut
  // and sample tables or activations larger than the memory left.
  splitDocuments(t.split, 0);
  if (memory == MemoryCheck::ThisMachine)
    checkGptJobMemory(t, k.out.deepspeed.batch, memoryBudget());
  k.out.deepspeed.scheduler = annealingSchedule(k);
  return std::move(k.out);
}

std::unique_ptr<Tokenizer> makeJobTokenizer(const GptTrainConfig& train) {
  return makeTokenizer(train.tokenizerType, train.vocabFile, train.mergeFile);
}

GptConfig modelConfigFor(const GptTrainConfig& train, const Tokenizer& tokenizer) {
  GptConfig model = train.model;
  model.vocabSize = tokenizer.vocabularySize();
  return model;
}

}  // namespace ds::runtime
