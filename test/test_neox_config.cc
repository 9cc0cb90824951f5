// GPT-NeoX YAML configs: merging, spellings, DeepSpeed keys inline or from deepspeed_config, the
// NeoX lr schedule, and a clear refusal for every key this trainer does not implement.
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "runtime/config/gpt_job_memory.h"
#include "runtime/config/job_config.h"
#include "runtime/lr/lr_schedule.h"
#include "test/scratch_dir.h"

using ds::runtime::parseNeoxConfig;
using ds::runtime::readNeoxYaml;

namespace {

const char* kBase = "num-layers: 3\nhidden_size: 48\nnum-attention-heads: 4\nseq-length: 32\n"
                    "max-position-embeddings: 64\ndata-path: data/x\ntrain-iters: 100\n"
                    "batch-size: 4\n";

struct Files {
  std::filesystem::path dir = ds::test::makeScratchDir("neox-config");
  std::string write(const std::string& name, const std::string& text) {
    std::ofstream(dir / name) << text;
    return (dir / name).string();
  }
};

ds::runtime::NeoxConfig parse(const std::string& extra, int64_t world = 2) {
  Files f;
  return parseNeoxConfig(readNeoxYaml({f.write("a.yml", std::string(kBase) + extra)}), world);
}

std::string errorOf(const std::string& extra) {
  try {
    parse(extra);
  } catch (const ds::Error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("neox config: model, data and training keys in either spelling", "[neox]") {
  const auto c = parse(
      "pos_emb: rotary\nrotary-pct: 0.25\nnorm: rmsnorm\nactivation: geglu\nno-weight-tying: "
      "true\ngpt_j_residual: true\ncheckpoint-activations: true\nsplit: 98,2,0\nseed: 7\n"
      "eval-interval: 10\neval-iters: 3\nsave: ck\nsave-interval: 50\n");
  const auto& m = c.train.model;
  CHECK(m.numLayers == 3);
  CHECK(m.hiddenSize == 48);
  CHECK(m.posEmb == ds::runtime::PositionEmbedding::Rotary);
  CHECK(m.rotaryDim() == 2);  // 12 * 0.25 = 3 -> even
  CHECK(m.norm == ds::runtime::NormKind::RmsNorm);
  CHECK(m.activation == ds::runtime::Activation::Geglu);
  CHECK_FALSE(m.weightTying);
  CHECK(m.gptjResidual);
  CHECK(m.checkpointActivations);
  CHECK(c.train.split == "98,2,0");
  CHECK(c.train.seed == 7);
  CHECK(c.train.save == "ck");
  CHECK(c.deepspeed.batch.microBatchPerGpu == 4);
  CHECK(c.deepspeed.batch.trainBatchSize == 8);  // 4 x 2 ranks
}

TEST_CASE("neox config: files merge in order and a key set twice is an error", "[neox]") {
  Files f;
  const auto a = f.write("a.yml", kBase);
  const auto b = f.write("b.yml", "zero_optimization: {stage: 2}\nprecision: bfloat16\n");
  const auto c = parseNeoxConfig(readNeoxYaml({a, b}), 1);
  CHECK(c.deepspeed.zero.stage == 2);
  CHECK(c.deepspeed.precision.modelDtype == ds::DType::BF16);
  const auto dup = f.write("c.yml", "hidden-size: 64\n");
  CHECK_THROWS_WITH(readNeoxYaml({a, dup}), Catch::Contains("hidden-size is already set by") &&
                                                Catch::Contains("a.yml"));
}

TEST_CASE("neox config: DeepSpeed keys from a deepspeed_config JSON", "[neox]") {
  Files f;
  const auto json = f.write("ds.json", R"({"zero_optimization": {"stage": 1},
      "optimizer": {"type": "AdamW", "params": {"lr": 0.003}}})");
  const auto y = f.write("a.yml", std::string(kBase) + "deepspeed_config: " + json + "\n");
  const auto c = parseNeoxConfig(readNeoxYaml({y}), 1);
  CHECK(c.deepspeed.zero.stage == 1);
  CHECK(c.deepspeed.optimizer->lr() == Approx(0.003));
  const auto both = f.write("b.yml", std::string(kBase) + "zero_optimization: {stage: 2}\n" +
                                         "deepspeed_config: " + json + "\n");
  CHECK_THROWS_WITH(readNeoxYaml({both}), Catch::Contains("set both inline and in"));
}

TEST_CASE("neox config: NeoX's annealing lr schedule", "[neox]") {
  const auto c = parse("lr: 0.01\nmin-lr: 0.001\nwarmup: 0.1\nlr-decay-style: cosine\n");
  auto s = ds::runtime::makeLrSchedule(*c.deepspeed.scheduler, 0.01, 0.9);
  std::vector<double> lrs;
  for (int i = 0; i < 120; ++i, s->step()) lrs.push_back(s->lr());
  // Update u uses NeoX's get_lr() at num_iters = u: the very first update has lr 0 in warmup.
  CHECK(lrs[0] == 0.0);
  CHECK(lrs[1] == Approx(0.001));
  CHECK(lrs[10] == Approx(0.01));  // warmup done
  CHECK(lrs[55] == Approx(0.001 + 0.009 / 2 * (1 + std::cos(M_PI * 45 / 90))));
  CHECK(lrs[100] == Approx(0.001));  // decay done: min-lr
  CHECK(lrs[119] == Approx(0.001));
  const auto linear = parse("lr: 0.01\nwarmup: 0\nlr-decay-iters: 50\n");
  s = ds::runtime::makeLrSchedule(*linear.deepspeed.scheduler, 0.01, 0.9);
  CHECK(s->lr() == Approx(0.01));
  s->step();
  CHECK(s->lr() == Approx(0.01 * 49 / 50));
}

TEST_CASE("neox config: unknown, unimplemented and malformed keys are refused by name",
          "[neox]") {
  CHECK_THAT(errorOf("num-layer: 4\n"), Catch::Contains("did you mean \"num-layers\""));
  CHECK_THAT(errorOf("moe-glu: true\n"),
             Catch::Contains("moe-glu: gated experts in NeoX's megablocks MoE is not "
                             "implemented") &&
                 Catch::EndsWith("set it to false"));
  CHECK(errorOf("moe-num-experts: 2\nmoe-top-k: 2\nmoe-router-type: topk\n") == "no error");
  CHECK_THAT(errorOf("moe-num-experts: 2\nmoe-expert-parallel-size: 2\n"),
             Catch::Contains("moe-expert-parallel-size: 2: NeoX's dropless MoE splits its "
                             "experts over the model-parallel ranks"));
  CHECK(errorOf("moe-num-experts: 2\nmoe-type: deepspeed\nmoe-expert-parallel-size: 2\n") ==
        "no error");
  CHECK_THROWS_WITH(
      parse("moe-num-experts: 4\nmoe-type: deepspeed\nmoe-expert-parallel-size: 4\n", 6),
      Catch::StartsWith("moe-expert-parallel-size 4: the data-parallel size 6 "
                        "(world size 6) does not divide by it"));
  CHECK(errorOf("moe-num-experts: 2\npipe-parallel-size: 2\n") == "no error");
  // Expert parallelism within each stage's data group, Ulysses beside MoE.
  CHECK_NOTHROW(
      parse("moe-num-experts: 2\nmoe-type: deepspeed\npipe-parallel-size: 2\n"
            "moe-expert-parallel-size: 2\n",
            8));
  CHECK(errorOf("moe-num-experts: 2\nsequence_parallel_size: 2\n") == "no error");
  CHECK(errorOf("moe-num-experts: 2\nmoe-type: deepspeed\nmodel-parallel-size: 2\n") == "no error");
  CHECK_THAT(errorOf("moe-num-experts: 2\nmoe-type: deepspeed\nmodel-parallel-size: 2\n"
                     "moe-expert-parallel-size: 2\n"),
             Catch::Contains("moe-expert-parallel-size 2 with model-parallel-size 2: 2 experts do "
                             "not split evenly over 4 ranks"));
  CHECK_THAT(errorOf("moe-num-experts: 2\nmoe-type: switch\n"),
             Catch::Contains("moe-type: expected one of megablocks, deepspeed"));
  CHECK(errorOf("pipe-parallel-size: 1\nopenai-gelu: false\n") == "no error");
  CHECK_THAT(errorOf("openai-gelu: true\n"), Catch::Contains("openai-gelu: the exact-erf GeLU is not implemented"));
  CHECK_THAT(errorOf("pos-emb: alibi\n"),
             Catch::Contains("pos-emb: expected one of learned, sinusoidal, rotary, none"));
  CHECK_THAT(errorOf("hidden-dropout: lots\n"), Catch::Contains("hidden-dropout: expected a number"));
  CHECK_THAT(errorOf("scheduler: {type: WarmupLR}\n"), Catch::Contains("remove the scheduler block"));
  // DeepSpeed's spelling of NeoX's partition-activations.
  CHECK(parse("activation_checkpointing: {partition_activations: true}\n").train.model
            .partitionActivations);
  CHECK(parse("partition-activations: true\n").train.model.partitionActivations);
  CHECK_FALSE(parse("partition-activations: false\n").train.model.partitionActivations);
  CHECK_THAT(errorOf("checkpoint-num-layers: 2\n"), Catch::Contains("only 1"));
  CHECK_THAT(errorOf("lr-decay-style: exponential\n"), Catch::Contains("linear, cosine or constant"));
  CHECK_THAT(errorOf("tokenizer-type: TiktokenTokenizer\n"), Catch::Contains("GPT2BPETokenizer"));
  CHECK(parse("bias-gelu-fusion: true\n").notes.size() == 1);

  Files f;
  CHECK_THROWS_WITH(readNeoxYaml({f.write("bad.yml", "a: [1, 2\n")}), Catch::Contains("not valid YAML"));
  CHECK_THROWS_WITH(readNeoxYaml({f.write("list.yml", "- 1\n- 2\n")}),
                    Catch::Contains("expected a mapping"));
  CHECK_THROWS_WITH(readNeoxYaml({(f.dir / "missing.yml").string()}), Catch::Contains("missing.yml"));
  CHECK_THROWS_WITH(parseNeoxConfig(readNeoxYaml({f.write("n.yml", "num-layers: 2\n")}), 1),
                    Catch::Contains("train-iters: required"));
}

TEST_CASE("neox config: the tokenizer is NeoX's default GPT2BPETokenizer unless named", "[neox]") {
  const auto byDefault = parse("");
  CHECK(byDefault.train.tokenizerType == "GPT2BPETokenizer");
  // Without the files, the message says both ways out.
  CHECK_THROWS_WITH(ds::runtime::makeJobTokenizer(byDefault.train),
                    Catch::Contains("vocab-file is not set") &&
                        Catch::Contains("tokenizer-type: ByteTokenizer"));
  const auto byte = parse("tokenizer-type: ByteTokenizer\n");
  CHECK(ds::runtime::makeJobTokenizer(byte.train)->vocabularySize() == 257);
  Files f;
  const std::string json = f.write("tokenizer.json", "{}");
  const auto hf = parse("tokenizer-type: HFTokenizer\nvocab-file: " + json + "\n");
  CHECK(hf.train.tokenizerType == "HFTokenizer");
  CHECK_THROWS_WITH(ds::runtime::makeJobTokenizer(hf.train), Catch::Contains(json));
}

TEST_CASE("neox config: the launcher's shipped form parses to the same job", "[neox]") {
  Files f;
  const auto y = f.write("a.yml", kBase);
  const std::string text = ds::runtime::readJobConfigText({y});
  const auto job = ds::runtime::parseJobConfig(text, 2, "config");
  REQUIRE(job.gpt);
  CHECK(job.gpt->model.hiddenSize == 48);
  CHECK_THROWS_WITH(ds::runtime::readJobConfigText({y + "," + f.write("d.json", "{}")}),
                    Catch::Contains("a DeepSpeed config, given beside NeoX config files"));
}

TEST_CASE("neox config: a key given twice in one file is refused by file, line and key", "[neox]") {
  Files f;
  CHECK_THROWS_WITH(readNeoxYaml({f.write("a.yml", std::string(kBase) + "train-iters: 200\n")}),
                    Catch::Contains("a.yml:9: train-iters is already set on line 7 of this file"));
  CHECK_THROWS_WITH(
      readNeoxYaml({f.write("b.yml", "zero_optimization:\n  stage: 1\n  stage: 2\n")}),
      Catch::Contains("b.yml:3: zero_optimization.stage is already set on line 2"));
  // Two spellings of one key are two keys to YAML; the merge refuses them as before.
  CHECK_THROWS_WITH(readNeoxYaml({f.write("c.yml", "train-iters: 1\ntrain_iters: 2\n")}),
                    Catch::Contains("train_iters is already set by"));
}

TEST_CASE("neox config: YAML aliases cannot expand a file without bound", "[neox]") {
  // The "billion laughs": 9 levels of 9 aliases are 387 million values from 9 lines.
  std::string bomb = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n";
  for (char c = 'b'; c <= 'i'; ++c) {
    bomb += std::string(1, c) + ": &" + c + " [";
    for (int i = 0; i < 9; ++i) bomb += std::string(i ? ", " : "") + "*" + char(c - 1);
    bomb += "]\n";
  }
  Files f;
  CHECK_THROWS_WITH(readNeoxYaml({f.write("bomb.yml", bomb)}),
                    Catch::Contains("bomb.yml:6: f: the file expands to more than 100000 values"));
  // An alias used as intended is fine.
  const auto ok = f.write("ok.yml", std::string(kBase) +
                                        "x-common: &c {stage: 1}\n"
                                        "zero_optimization: *c\n");
  CHECK_THROWS_WITH(parseNeoxConfig(readNeoxYaml({ok}), 1), Catch::Contains("x-common: unknown"));
}

TEST_CASE("neox config: a deepspeed_config JSON is parsed with bounded nesting", "[neox]") {
  Files f;
  const auto deep =
      f.write("deep.json", "{\"x\": " + std::string(100000, '[') + std::string(100000, ']') + "}");
  CHECK_THROWS_WITH(
      readNeoxYaml({f.write("a.yml", std::string(kBase) + "deepspeed_config: " + deep + "\n")}),
      Catch::Contains("deep.json: nested more than 64 levels deep at line 1, column 70"));
  const auto twice = f.write("twice.json", R"({"gradient_clipping": 1, "gradient_clipping": 2})");
  CHECK_THROWS_WITH(
      readNeoxYaml({f.write("b.yml", std::string(kBase) + "deepspeed_config: " + twice + "\n")}),
      Catch::Contains("twice.json: duplicate key \"gradient_clipping\""));
}

TEST_CASE("neox config: a split every rank would refuse is refused when the config is read",
          "[neox]") {
  CHECK_THAT(errorOf("split: 0,0,0\n"), Catch::Contains("split \"0,0,0\": expected 1 to 3") &&
                                            Catch::Contains("with a positive sum"));
  CHECK_THAT(errorOf("split: -1,2,3\n"), Catch::Contains("\"-1\" is not a non-negative number"));
  CHECK_THAT(errorOf("split: 1,nan,1\n"), Catch::Contains("\"nan\" is not a non-negative"));
  CHECK_THAT(errorOf("split: 1,2,3,4\n"), Catch::Contains("expected 1 to 3"));
  CHECK(errorOf("split: 100,0,0\n") == "no error");
}

TEST_CASE("neox config: sample tables and activations beyond the memory left are refused",
          "[neox]") {
  using namespace ds;
  using namespace ds::runtime;
  GptTrainConfig t;  // 2 layers, hidden 64, 4 heads, seq 64; eval-iters 100 every 1000, 969,30,1
  t.trainIters = 100;
  const GptJobMemory e = estimateGptJobMemory(t, BatchConfig{8, 4, 1});  // 4 x 1 x 2 ranks
  CHECK(e.trainSamples == 800);
  CHECK(e.validSamples == 800);  // one evaluation (at the end) of 100 batches of 8
  CHECK(e.sampleIndex == 1600 * 24);
  // Floats a block keeps for 4 samples: its rows' tensors (input, two norm outputs, the
  // attention's residual sum; q/k/v, the attention's output; the MLP's two of 4 x 64) and
  // attention's 2 statistics a row of each head (no [T, T] probabilities).
  const double block = 4 * 64 * (8 * 64 + 4 * 64 + 4 * 64) + 4 * 4 * 2 * 64;
  CHECK(e.trainActivations == 2 * block * 4);
  CHECK(e.evalActivations == block * 4);  // one block of micro-batch 4, kept one at a time
  t.model.checkpointActivations = true;
  CHECK(estimateGptJobMemory(t, BatchConfig{8, 4, 1}).trainActivations ==
        (2 * 4 * 64 * 64 + block) * 4);
  t.model.checkpointActivations = false;
  {  // On one of 2 model ranks: the sliced tensors halve, the replicated rows (the block's input,
     // two norm outputs and residual sum) too with sequence parallelism.
    GptTrainConfig sliced = t;
    sliced.parallel.model = 2;
    const double replicated = 4 * 64 * 4 * 64;
    const double half = replicated + (block - replicated) / 2;
    CHECK(estimateGptJobMemory(sliced, BatchConfig{8, 4, 1}).trainActivations == 2 * half * 4);
    sliced.model.sequenceParallel = true;
    CHECK(estimateGptJobMemory(sliced, BatchConfig{8, 4, 1}).trainActivations == block * 4);
    // Evaluation is sharded too: its one block is the training block's.
    CHECK(estimateGptJobMemory(sliced, BatchConfig{8, 4, 1}).evalActivations == block / 2 * 4);
  }
  {  // Ulysses over 2 ranks: half the positions of each sample, the context in two layouts.
    GptTrainConfig ulysses = t;
    ulysses.parallel.sequence = 2;
    const double rows = 4 * 64 / 2, perRow = 8 * 64 + 4 * 64 + 4 * 64 + 64;
    CHECK(estimateGptJobMemory(ulysses, BatchConfig{8, 4, 1}).trainActivations ==
          2 * (rows * perRow + 4 * 4 * 2 * 64 / 2) * 4);
  }

  const MemoryBudget gib{uint64_t{1} << 30, "a test budget"};
  CHECK_NOTHROW(checkGptJobMemory(t, BatchConfig{8, 4, 1}, gib));
  struct Case {
    int64_t evalIters, evalInterval;
    BatchConfig batch;
    std::vector<std::string> message;
  };
  const std::vector<Case> cases = {
      {100,
       1000,
       {2000000000, 1000000000, 1},
       {"batch-size 1000000000 x seq-length 64 tokens needs at least",
        "of activations for one micro-batch", "checkpoint-activations: true",
        "only 1.00 GiB is left under a test budget"}},
      // A huge accumulation costs an evaluation nothing more (micro-batch by micro-batch): only
      // the sample index grows.
      {100,
       1000,
       {8000000000, 4, 1000000000},
       {"the sample index of 1600000000000 samples"}},
      {0,
       1000,
       {8000000000, 4, 1000000000},
       {"the sample index of 800000000000 samples (train-iters 100 x train_batch_size "
        "8000000000) needs at least 17881.39 GiB"}},
      {100000000,
       10,
       {8, 4, 1},
       {"eval-iters 100000000 x train_batch_size per evaluation) needs at least"}},
  };
  for (const Case& c : cases) {
    INFO(c.message.front());
    t.evalIters = c.evalIters;
    t.evalInterval = c.evalInterval;
    for (const std::string& part : c.message)
      CHECK_THROWS_WITH(checkGptJobMemory(t, c.batch, gib), Catch::Contains(part));
  }
  // No validation split: eval-iters allocates nothing.
  t.split = "100,0,0";
  CHECK_NOTHROW(checkGptJobMemory(t, BatchConfig{8, 4, 1}, gib));
}

TEST_CASE("neox config: the checkpoint schedule keys", "[neox]") {
  using ds::runtime::CheckpointScale;
  const auto c = parse(
      "save: ck\ncheckpoint_factor: 2\ncheckpoint-scale: log\nextra-save-iters: [50, 0, 7, 7]\n"
      "keep-last-n-checkpoints: 3\n");
  const auto& s = c.train.checkpoints;
  CHECK(s.factor == 2.0);
  CHECK(s.scale == CheckpointScale::Log);
  CHECK(s.extraSaveIters == std::vector<int64_t>{0, 7, 50});
  CHECK(s.keepLast == 3);
  CHECK(ds::runtime::neoxSaveIterations(s, c.train.trainIters) ==
        std::vector<int64_t>{0, 1, 2, 4, 7, 8, 16, 32, 50, 64, 100});
  // NeoX's defaults: linear, no factor, no extras, keep everything; nulls are the same.
  const auto d = parse("checkpoint-factor: null\nextra-save-iters: null\n"
                       "keep-last-n-checkpoints: null\n");
  CHECK_FALSE(d.train.checkpoints.periodic());
  CHECK(d.train.checkpoints.scale == CheckpointScale::Linear);
  CHECK(d.train.checkpoints.extraSaveIters.empty());
  CHECK(d.train.checkpoints.keepLast == 0);
  CHECK(parse("checkpoint-factor: 1000\n").train.checkpoints.factor == 1000.0);

  CHECK_THAT(errorOf("checkpoint-factor: 2.5\n"), Catch::Contains("checkpoint-factor") &&
                                                      Catch::Contains("whole number"));
  CHECK_THAT(errorOf("checkpoint-factor: 1\ncheckpoint-scale: log\n"),
             Catch::Contains("checkpoint-factor") && Catch::Contains("checkpoint-scale: linear"));
  CHECK_THAT(errorOf("checkpoint-factor: -5\n"), Catch::Contains("checkpoint-factor: expected"));
  CHECK_THAT(errorOf("checkpoint-factor: often\n"),
             Catch::Contains("checkpoint-factor: expected a number"));
  CHECK_THAT(errorOf("checkpoint-scale: exponential\n"),
             Catch::Contains("checkpoint-scale: expected one of linear, log"));
  CHECK_THAT(errorOf("extra-save-iters: 500\n"),
             Catch::Contains("extra-save-iters: expected a list of iterations"));
  CHECK_THAT(errorOf("extra-save-iters: [10, -1]\n"),
             Catch::Contains("extra-save-iters: expected a list of iterations"));
  CHECK_THAT(errorOf("keep-last-n-checkpoints: 0\n"),
             Catch::Contains("keep-last-n-checkpoints: expected an integer in [1,"));
  CHECK_THAT(errorOf("save-interval: 10\ncheckpoint-factor: 10\n"),
             Catch::Contains("save-interval") && Catch::Contains("not both"));
  // save_iters is NeoX's derived list: a dumped config carries it beside what it derives from.
  const auto dumped = parse("checkpoint-factor: 10\nsave-iters: [10, 20]\n");
  CHECK(std::find_if(dumped.notes.begin(), dumped.notes.end(), [](const std::string& n) {
          return n.rfind("save-iters: no effect", 0) == 0;
        }) != dumped.notes.end());
  CHECK_THAT(errorOf("save-iters: [10, 20]\n"), Catch::Contains("list them in extra-save-iters"));
  CHECK(errorOf("save-iters: null\n") == "no error");
}

TEST_CASE("neox config: the LLaMA family's model keys", "[neox]") {
  // NeoX's LLaMA configs' keys, in their underscore spelling and Python's False.
  const auto c = parse(
      "norm: rmsnorm\nrms_norm_epsilon: 1.0e-6\nactivation: swiglu\nintermediate_size: 384\n"
      "mlp_multiple_of: 16\nnum_kv_heads: 2\nuse_bias_in_norms: false\n"
      "use_bias_in_attn_linear: False\nuse_bias_in_mlp: false\npos_emb: rotary\n"
      "rotary_emb_base: 500000\n");
  const auto& m = c.train.model;
  CHECK(m.norm == ds::runtime::NormKind::RmsNorm);
  CHECK(m.rmsNormEpsilon == 1e-6);
  CHECK(m.activation == ds::runtime::Activation::Swiglu);
  CHECK(m.ffnInputSize() == 256);  // int(384 * 2 / 3), a multiple of 32
  CHECK(m.ffnSize() == 128);
  CHECK(m.kvHeads() == 2);
  CHECK(m.qkvSize() == 48 + 2 * 2 * 12);
  CHECK_FALSE(m.biasInNorms);
  CHECK_FALSE(m.biasInAttnLinear);
  CHECK_FALSE(m.biasInMlp);
  CHECK(m.rotaryEmbBase == 500000.0);

  const auto s = parse(
      "norm: scalenorm\nscalenorm-epsilon: 0.5\nactivation: swish\n"
      "intermediate-size: null\nnum-kv-heads: null\n");
  CHECK(s.train.model.norm == ds::runtime::NormKind::ScaleNorm);
  CHECK(s.train.model.scalenormEpsilon == 0.5);
  CHECK(s.train.model.activation == ds::runtime::Activation::Silu);  // NeoX's swish is SiLU
  CHECK(s.train.model.kvHeads() == 4);
  CHECK(s.train.model.ffnSize() == 4 * 48);

  CHECK_THAT(errorOf("num-kv-heads: 3\n"),
             Catch::Contains("num-kv-heads: 3 does not divide num-attention-heads 4"));
  CHECK_THAT(errorOf("activation: tanh\n"),
             Catch::Contains("activation: expected one of gelu, softsign, mish, geglu, relu"));
  CHECK_THAT(errorOf("norm: te_rmsnorm\n"), Catch::Contains("norm: expected one of"));
  // int(128 * 2 / 3) = 85 outputs round to 86 but 42 inputs stay 42: NeoX fails on it too.
  CHECK_THAT(errorOf("activation: swiglu\nintermediate-size: 128\n"),
             Catch::Contains("dense_h_to_4h 86 outputs but dense_4h_to_h 42 inputs"));
  CHECK_THAT(errorOf("use-bias-in-mlp: 0\n"), Catch::Contains("use-bias-in-mlp: expected true"));
}

namespace {

// kBase with the per-split lists instead of data-path.
std::string withoutDataPath(const std::string& extra) {
  std::string base = kBase;
  const std::string dataPath = "data-path: data/x\n";
  base.erase(base.find(dataPath), dataPath.size());
  return base + extra;
}

ds::runtime::NeoxConfig parseLists(const std::string& extra) {
  Files f;
  return parseNeoxConfig(readNeoxYaml({f.write("a.yml", withoutDataPath(extra))}), 2);
}

std::string listsError(const std::string& extra) {
  try {
    parseLists(extra);
  } catch (const ds::Error& e) {
    return e.what();
  }
  return "no error";
}

const char* kLists = "train-data-paths: [d/a, d/b]\nvalid-data-paths: [d/v]\ntest-data-paths: []\n";

}  // namespace

TEST_CASE("neox config: the data keys, NeoX's blending lists and their rules", "[neox]") {
  // train-/valid-/test-data-paths: equal weights unless given.
  const auto c = parseLists(kLists);
  CHECK(c.train.blended());
  CHECK(c.train.trainData.paths == std::vector<std::string>{"d/a", "d/b"});
  CHECK(c.train.trainData.weights == std::vector<double>{1.0, 1.0});
  CHECK(c.train.validData.paths == std::vector<std::string>{"d/v"});
  CHECK(c.train.testData.paths.empty());
  CHECK(c.train.dataPrefixes() == std::vector<std::string>{"d/a", "d/b", "d/v"});
  // *-data-weights, per split.
  const auto w = parseLists(std::string(kLists) +
                            "train-data-weights: [3, 0.5]\nvalid-data-weights: [2]\n"
                            "test-data-weights: []\n");
  CHECK(w.train.trainData.weights == std::vector<double>{3.0, 0.5});
  CHECK(w.train.validData.weights == std::vector<double>{2.0});
  // weight-by-num-documents and weighted-sampler-alpha.
  const auto d = parseLists(std::string(kLists) +
                            "weight-by-num-documents: true\nweighted-sampler-alpha: 0.3\n");
  CHECK(d.train.blend.weightByNumDocuments);
  CHECK(d.train.blend.alpha == 0.3);
  // NeoX's defaults parse beside data-path.
  const auto defaults = parse(
      "train-data-paths: null\nvalid-data-paths: null\ntest-data-paths: null\n"
      "train-data-weights: null\nvalid-data-weights: null\ntest-data-weights: null\n"
      "weight-by-num-documents: false\nweighted-sampler-alpha: 1.0\n"
      "train-label-data-paths: null\npos-train-data-paths: null\ntrain-reward-data-paths: null\n"
      "precompute-model-name: null\ntrain-impl: normal\ndataset-impl: gpt2\npack-impl: packed\n"
      "allow-chopped: true\nuse-shared-fs: true\ndpo-beta: 0.1\nkto-fp32: true\n");
  CHECK_FALSE(defaults.train.blended());
  CHECK(defaults.train.dataPrefixes() == std::vector<std::string>{"data/x"});

  // Either data-path or the lists; all three lists or none; weights fit their paths.
  CHECK_THAT(errorOf(kLists), Catch::Contains("data-path: set together with train-/valid-/test-"
                                              "data-paths") &&
                                  Catch::Contains("not both"));
  CHECK_THAT(listsError("train-data-paths: [d/a]\nvalid-data-paths: [d/v]\n"),
             Catch::Contains("test-data-paths: required with the other per-split data paths"));
  CHECK_THAT(listsError("train-data-paths: []\nvalid-data-paths: []\ntest-data-paths: []\n"),
             Catch::Contains("train-data-paths: expected at least one dataset prefix"));
  CHECK_THAT(listsError(std::string(kLists) + "train-data-weights: [1]\n"),
             Catch::Contains("train-data-weights: expected one weight per entry of "
                             "train-data-paths (2), got 1"));
  CHECK_THAT(listsError(std::string(kLists) + "valid-data-weights: [0]\n"),
             Catch::Contains("valid-data-weights: every weight is 0"));
  CHECK_THAT(listsError(std::string(kLists) + "train-data-weights: [1, -2]\n"),
             Catch::Contains("train-data-weights: expected a list of non-negative numbers"));
  CHECK_THAT(listsError("train-data-paths: d/a\nvalid-data-paths: []\ntest-data-paths: []\n"),
             Catch::Contains("train-data-paths: expected a list of dataset prefixes"));
  CHECK_THAT(errorOf("train-data-weights: [1, 2]\n"),
             Catch::Contains("train-data-weights: weights the datasets of train-data-paths, "
                             "which is not set"));
  CHECK_THAT(listsError(std::string(kLists) + "weighted-sampler-alpha: -1\n"),
             Catch::Contains("weighted-sampler-alpha: expected a number >= 0"));
  CHECK_THAT(listsError(std::string(kLists) + "weight-by-num-documents: yes please\n"),
             Catch::Contains("weight-by-num-documents: expected true or false"));
  CHECK_THAT(listsError(""), Catch::Contains("data-path: required"));
  // The test split is read by ds-config check only: said in a note.
  const auto tested =
      parseLists("train-data-paths: [d/a]\nvalid-data-paths: []\ntest-data-paths: [d/t]\n");
  CHECK(std::any_of(tested.notes.begin(), tested.notes.end(), [](const std::string& n) {
    return n.find("test-data-paths: read by ds-config check only") != std::string::npos;
  }));
}

TEST_CASE("neox config: label data paths pair with their data paths by NeoX's rules", "[neox]") {
  const std::string lists = std::string(kLists) + "train-label-data-paths: [d/la, d/lb]\n";
  const auto c = parseLists(lists + "valid-label-data-paths: [d/lv]\n");
  CHECK(c.train.trainData.labelPaths == std::vector<std::string>{"d/la", "d/lb"});
  CHECK(c.train.validData.labelPaths == std::vector<std::string>{"d/lv"});
  CHECK(c.train.testData.labelPaths.empty());  // test-data-paths is []: nothing to label
  // Label datasets are not text: the vocabulary scan of dataPrefixes() leaves them out.
  CHECK(c.train.dataPrefixes() == std::vector<std::string>{"d/a", "d/b", "d/v"});
  // NeoX's default (null) parses, in both data modes.
  CHECK(parseLists(std::string(kLists) + "train-label-data-paths: null\n"
                                         "valid-label-data-paths: null\n"
                                         "test-label-data-paths: null\n")
            .train.trainData.labelPaths.empty());
  // One label dataset per data path.
  CHECK_THAT(listsError(std::string(kLists) + "train-label-data-paths: [d/la]\n"),
             Catch::Contains("train-label-data-paths: 1 label datasets for the 2 of "
                             "train-data-paths"));
  CHECK_THAT(listsError(lists + "valid-label-data-paths: [d/l1, d/l2]\n"),
             Catch::Contains("valid-label-data-paths: 2 label datasets for the 1 of "
                             "valid-data-paths"));
  CHECK_THAT(listsError(lists + "valid-label-data-paths: [d/lv]\ntest-label-data-paths: [d/t]\n"),
             Catch::Contains("test-label-data-paths: 1 label datasets for the 0 of "
                             "test-data-paths"));
  // Training labels mean labels for the validation split too; others without training's are
  // ignored by NeoX: refused.
  CHECK_THAT(listsError(lists),
             Catch::Contains("valid-label-data-paths: required with train-label-data-paths"));
  CHECK_THAT(listsError(std::string(kLists) + "valid-label-data-paths: [d/lv]\n"),
             Catch::Contains("valid-label-data-paths: NeoX reads label datasets only when "
                             "train-label-data-paths is set"));
  CHECK_THAT(listsError(lists + "valid-label-data-paths: d/lv\n"),
             Catch::Contains("valid-label-data-paths: expected a list of dataset prefixes"));
  // data-path takes no labels.
  for (const char* key :
       {"train-label-data-paths", "valid-label-data-paths", "test-label-data-paths"})
    CHECK_THAT(errorOf(std::string(key) + ": [d/l]\n"),
               Catch::Contains(std::string(key) + ": label datasets pair with train-/valid-/"
                                                  "test-data-paths"));
}

TEST_CASE("neox config: reward and pairwise data and other training kinds are refused by feature",
          "[neox]") {
  CHECK_THAT(
      errorOf("train-reward-data-paths: [d/r]\n"),
      Catch::Contains("train-reward-data-paths: reward datasets") && !Catch::Contains("false"));
  for (const char* key :
       {"pos-train-data-paths", "neg-valid-data-paths", "pos-test-label-data-paths"})
    CHECK_THAT(errorOf(std::string(key) + ": [d/p]\n"),
               Catch::Contains(std::string(key) + ": pairwise positive/negative datasets") &&
                   Catch::Contains("remove it") && !Catch::Contains("false"));
  CHECK_THAT(errorOf("precompute-model-name: pythia\n"),
             Catch::Contains("precompute-model-name: precomputed reference log-probabilities"));
  CHECK_THAT(errorOf("train-impl: dpo\n"),
             Catch::Contains("train-impl: training other than the language-model loss") &&
                 Catch::Contains("set it to normal"));
  CHECK_THAT(errorOf("dataset-impl: pairwise\n"),
             Catch::Contains("dataset-impl:") && Catch::Contains("set it to gpt2"));
  CHECK_THAT(errorOf("pack-impl: unpacked\n"),
             Catch::Contains("pack-impl:") && Catch::Contains("set it to packed"));
  CHECK(errorOf("train-impl: normal\ndataset-impl: gpt2\npack-impl: packed\n") == "no error");
}

TEST_CASE("neox config: attention kinds, sliding window, qk norm and the other model options",
          "[neox]") {
  using ds::runtime::Activation;
  using ds::runtime::InitMethod;
  // Each key's NeoX default parses and changes nothing.
  const auto d = parse(
      "sliding_window_width: null\nuse_qk_layernorm: false\nattention_config: null\n"
      "expansion_factor: null\nopt_pos_emb_offset: 0\ngpt_j_tied: false\n"
      "rotary_save_freqs_buffer: false\n");
  CHECK(d.train.model.slidingWindowWidth == -1);
  CHECK_FALSE(d.train.model.qkNorm);
  CHECK(d.train.model.expansionFactor == 0.0);
  CHECK_FALSE(d.train.model.gptjTied);
  CHECK(std::find_if(d.notes.begin(), d.notes.end(), [](const std::string& n) {
          return n.rfind("rotary-save-freqs-buffer: no effect", 0) == 0;
        }) != d.notes.end());

  // Mistral's keys (configs/mistral/7B.yml): a window needs flash layers, as in NeoX.
  const auto mistral = parse(
      "sliding_window_width: 8\nattention_config: [[[\"flash\"], 3]]\nuse_qk_layernorm: true\n"
      "activation: mish\n");
  CHECK(mistral.train.model.slidingWindowWidth == 8);
  CHECK(mistral.train.model.qkNorm);
  CHECK(mistral.train.model.activation == Activation::Mish);
  CHECK(parse("activation: softsign\n").train.model.activation == Activation::Softsign);
  CHECK_THAT(errorOf("sliding-window-width: 8\n"),
             Catch::Contains("sliding-window-width: NeoX applies the window only in flash") &&
                 Catch::Contains("global layers (here 0-2)") &&
                 Catch::Contains("[[[\"flash\"], 3]]"));
  CHECK_THAT(errorOf("sliding-window-width: 8\nattention-config: [[[\"flash\", \"global\"], 1], "
                     "[[\"flash\"], 1]]\n"),
             Catch::Contains("global layers (here 1)"));
  CHECK_THAT(errorOf("sliding-window-width: -2\n"),
             Catch::Contains("sliding-window-width: expected an integer"));
  CHECK_THAT(errorOf("use-qk-layernorm: 1\n"), Catch::Contains("use-qk-layernorm: expected true"));
  CHECK_THAT(errorOf("use-qk-layernorm: true\nnum-kv-heads: 2\n"),
             Catch::Contains("use-qk-layernorm: NeoX's query/key norm"));

  // attention-config: NeoX's forms, its layer count rule, dense kinds only.
  CHECK(errorOf("attention-config: [[[\"global\"], 3]]\n") == "no error");
  CHECK(errorOf("attention-config: [[[\"flash\", \"global\", \"flash\"], \"all\"]]\n") ==
        "no error");
  CHECK(errorOf("attention-config: [\"flash\", \"flash\", \"global\"]\n") == "no error");
  CHECK_THAT(errorOf("attention-config: [[[\"flash\"], 4]]\n"),
             Catch::Contains("attention-config: names 4 layers but num-layers is 3"));
  CHECK_THAT(errorOf("attention-config: [[[\"flash\", \"global\"], \"all\"]]\n"),
             Catch::Contains("not divisible by the length of the pattern"));
  CHECK_THAT(errorOf("attention-config: [[[\"flash\"], 1], [[\"sparse_fixed\"], 2]]\n"),
             Catch::Contains("attention-config: \"sparse_fixed\" (layers 1-2) is not implemented"));
  for (const char* kind : {"local", "sparse_variable", "bigbird", "bslongformer", "gmlp", "amlp",
                           "mamba", "rwkv"})
    CHECK_THAT(errorOf(std::string("attention-config: [[[\"") + kind + "\"], 3]]\n"),
               Catch::Contains(std::string("\"") + kind + "\" (layers 0-2) is not implemented"));
  CHECK_THAT(errorOf("attention-config: [[[\"dense\"], 3]]\n"),
             Catch::Contains("attention kind \"dense\" is not one NeoX knows"));
  CHECK_THAT(errorOf("attention-config: flash\n"),
             Catch::Contains("attention-config: expected NeoX's list"));

  // Init methods: NeoX's names; the QR-based ones refused by name.
  const auto init = parse(
      "init_method: xavier_uniform\noutput_layer_init_method: single_residual_scaled_normal\n");
  CHECK(init.train.model.initMethod == InitMethod::XavierUniform);
  CHECK(init.train.model.outputLayerInitMethod == InitMethod::SingleResidualScaledNormal);
  CHECK(parse("init-method: xavier_normal\n").train.model.initMethod == InitMethod::XavierNormal);
  CHECK_THAT(errorOf("output-layer-init-method: scaled_orthogonal\n"),
             Catch::Contains("output-layer-init-method: scaled_orthogonal (NeoX's QR-based init) "
                             "is not implemented"));
  CHECK_THAT(errorOf("init-method: uniform\n"), Catch::Contains("init-method: expected one of"));

  // expansion-factor sets the MLP width as int(factor * hidden); not with intermediate-size.
  CHECK(parse("expansion-factor: 2.5\n").train.model.ffnSize() == 120);
  CHECK_THAT(errorOf("expansion-factor: 2\nintermediate-size: 96\n"),
             Catch::Contains("expansion-factor: set together with intermediate-size"));
  CHECK_THAT(errorOf("expansion-factor: -1\n"), Catch::Contains("expansion-factor: expected"));
  CHECK_THAT(errorOf("opt-pos-emb-offset: 2\n"),
             Catch::Contains("opt-pos-emb-offset: OPT's") && Catch::Contains("set it to 0"));
  CHECK(parse("gpt-j-residual: true\ngpt-j-tied: true\n").train.model.gptjTied);
  CHECK_THAT(errorOf("gpt-j-tied: true\n"),
             Catch::Contains("gpt-j-tied: ties the two norms of a gpt-j block, but gpt-j-residual "
                             "is false"));
}

TEST_CASE("neox config: pipe-parallel-size and model-parallel-size set the data-parallel size",
          "[neox]") {
  // NeoX's default: no pipeline (0 is one stage, as 1 is), one slice, its partition method.
  const auto plain = parse("", 2);
  CHECK(plain.train.parallel.pipe == 1);
  CHECK(plain.train.parallel.model == 1);
  CHECK(plain.train.parallel.partitionMethod == "type:transformer|mlp");
  CHECK(parse("pipe-parallel-size: 0\n", 2).train.parallel.pipe == 1);
  CHECK(plain.deepspeed.batch.trainBatchSize == 8);  // batch-size 4 x 2 ranks

  // 8 ranks of pipe 2 x model 2: 2 data-parallel replicas share the batch.
  const auto grid =
      parse("pipe-parallel-size: 2\nmodel_parallel_size: 2\npipe-partition-method: uniform\n", 8);
  CHECK(grid.train.parallel.pipe == 2);
  CHECK(grid.train.parallel.model == 2);
  CHECK(grid.train.parallel.partitionMethod == "uniform");
  CHECK(grid.deepspeed.batch.trainBatchSize == 8);  // 4 x 2 replicas, not 4 x 8 ranks
  CHECK(grid.deepspeed.batch.microBatchPerGpu == 4);
  // train_batch_size given: accumulation follows the data-parallel size, as NeoX's
  // calculate_derived and DeepSpeed's mpu case compute it.
  const auto given = parse("pipe-parallel-size: 2\ntrain_batch_size: 32\n", 4);
  CHECK(given.deepspeed.batch.gradientAccumulationSteps == 4);  // 32 / micro 4 / 2 replicas
  // Tools that read only the model take one replica.
  CHECK(parse("model-parallel-size: 4\n", ds::runtime::kOneReplica).deepspeed.batch.trainBatchSize ==
        4);

  CHECK_THAT(errorOf("pipe-parallel-size: 2\nmodel-parallel-size: 2\n"),  // world 2
             Catch::Contains("world size 2 is not a multiple of pipe-parallel-size x "
                             "model-parallel-size (2 x 2 = 4") &&
                 Catch::Contains("run 4, 8, 12"));
  CHECK_THAT(errorOf("model-parallel-size: 0\n"), Catch::Contains("model-parallel-size"));
  CHECK_THAT(errorOf("pipe-parallel-size: -1\n"), Catch::Contains("pipe-parallel-size"));
  CHECK_THAT(errorOf("pipe-partition-method: balanced\n"),
             Catch::Contains("pipe-partition-method: expected \"parameters\", \"uniform\""));
  CHECK_THAT(errorOf("pipe-partition-method: \"type:(\"\n"),
             Catch::Contains("does not compile"));
  CHECK(parse("pipe-partition-method: Parameters\n").train.parallel.partitionMethod ==
        "Parameters");
  // DeepSpeed's PipelineEngine allows ZeRO 0 and 1 only.
  CHECK_THAT(errorOf("pipe-parallel-size: 2\nzero_optimization:\n  stage: 2\n"),
             Catch::Contains("ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism"));
  CHECK(parse("model-parallel-size: 2\nzero_optimization:\n  stage: 3\n")
            .deepspeed.zero.stage == 3);
}

TEST_CASE("neox config: sequence parallelism, Megatron's and DeepSpeed-Ulysses'", "[neox]") {
  // Megatron's: with model slices; a note at model size 1, as NeoX ignores it there.
  CHECK(parse("model-parallel-size: 2\nsequence-parallel: true\n").train.model.sequenceParallel);
  const auto alone = parse("sequence-parallel: true\n");
  CHECK(std::find(alone.notes.begin(), alone.notes.end(),
                  "sequence-parallel: no effect at model-parallel-size 1 (as in NeoX)") !=
        alone.notes.end());
  CHECK(parse("model-parallel-size: 2\nsequence-parallel: true\npipe-parallel-size: 2\n", 4)
            .train.model.sequenceParallel);
  // DeepSpeed-Ulysses: the DeepSpeed key, read by the GPT trainer; the batch divides by u.
  const auto ulysses = parse("sequence_parallel_size: 2\n", 4);
  CHECK(ulysses.train.parallel.sequence == 2);
  CHECK(ulysses.deepspeed.batch.trainBatchSize == 8);  // micro 4 x 2 sample streams
  CHECK_THAT(errorOf("sequence_parallel_size: 2\n"),  // world 2: one stream of 2
             Catch::Contains("no error"));
  CHECK_THAT(errorOf("sequence_parallel_size: 0\n"),
             Catch::Contains("sequence_parallel_size: expected an integer >= 1"));
  CHECK_THAT(errorOf("sequence_parallel_size: 2\nmodel-parallel-size: 2\n"),
             Catch::Contains("not implemented with model-parallel-size or pipe-parallel-size"));
  CHECK_THAT(errorOf("sequence_parallel_size: 2\nnum-kv-heads: 1\n"),
             Catch::Contains("sequence_parallel_size 2: num-kv-heads 1 does not divide by it"));
  CHECK_THAT(errorOf("sequence_parallel_size: 4\n"),
             Catch::Contains("world size 2 is not a multiple of") &&
                 Catch::Contains("x sequence_parallel_size (1 x 1 x 4 = 4"));
  CHECK_THAT(errorOf("sequence_parallel_size: 2\nelasticity:\n  enabled: true\n"
                     "  max_train_batch_size: 64\n  micro_batch_sizes: [4]\n"
                     "  min_gpus: 2\n  max_gpus: 4\n  ignore_non_elastic_batch_info: true\n"),
             Catch::Contains("not implemented with elasticity"));
}

TEST_CASE("neox config: output-layer-parallelism and partitioned activations at model > 1",
          "[neox]") {
  // NeoX's Literal["column"]: the only split implemented here too; anything else by name.
  CHECK(errorOf("output-layer-parallelism: column\nmodel-parallel-size: 2\n") == "no error");
  CHECK_THAT(errorOf("output_layer_parallelism: row\n"),
             Catch::Contains("output-layer-parallelism: \"row\" is not implemented"));
  // Splitting checkpointed activations over the model ranks is honoured (the model keeps 1/t of
  // each checkpointed input: test_gpt_tensor_parallel.cc), in either spelling, with no note.
  const auto c = parse("model-parallel-size: 2\npartition-activations: true\n");
  CHECK(c.train.model.partitionActivations);
  for (const std::string& n : c.notes) CHECK(n.find("partition") == std::string::npos);
  CHECK(parse("activation_checkpointing: {partition_activations: true}\n").notes.empty());
}
