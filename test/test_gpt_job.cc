// The GPT trainer end to end through ds-launch on 2 loopback nodes x 2 ranks: a NeoX YAML job at
// ZeRO stage 3 (tied embeddings gathered twice per pass) learns, evaluates, and a run stopped by
// exit-interval and resumed from its checkpoint ends bitwise where the straight run ends, with the
// same losses on the way.
#include <sys/wait.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <vector>

#include "common/usable_cores.h"
#include "kernels/accelerator.h"
#include "kernels/cpu/transformer_kernels.h"
#include "test/bpe_test_files.h"
#include "test/byte_corpus.h"
#include "test/launch_harness.h"
#include "test/run_command.h"
#include "test/scratch_dir.h"
#include "test/skip.h"

using namespace ds::test;
using namespace std::chrono_literals;

namespace {

const char* kHostfile = "127.0.0.1 slots=2\n127.0.0.2 slots=2\n";

std::string yaml(const std::string& extra) {
  return R"(num-layers: 2
hidden-size: 32
num-attention-heads: 2
seq-length: 16
max-position-embeddings: 16
pos-emb: learned
data-path: data/corpus
tokenizer-type: ByteTokenizer
split: "90,10,0"
train-iters: 6
lr-decay-iters: 6
lr: 0.01
warmup: 0.2
batch-size: 2
gradient_accumulation_steps: 2
log-interval: 1
eval-interval: 3
eval-iters: 1
zero_optimization:
  stage: 3
  stage3_param_persistence_threshold: 0
)" + extra;
}

void writeCorpus(const std::string& dir) {
  writeByteCorpus(dir + "/data/corpus", 40, [](int d) { return 3 + d % 4; });
}

// `wrapper` comes before ds-launch (e.g. env VAR=value).
LaunchedJob startGpt(const std::string& dir, const std::string& extra,
                     const std::vector<std::string>& wrapper = {},
                     const std::vector<std::string>& trainArgs = {}) {
  writeFile(dir + "/hostfile", kHostfile);
  writeFile(dir + "/gpt.yml", yaml(extra));
  std::vector<std::string> args = {
      "--hostfile", "hostfile", "--master_port", "0",       "--log_dir",
      "logs",       "train",    "--config",      "gpt.yml", "--print_param_hash"};
  args.insert(args.end(), trainArgs.begin(), trainArgs.end());
  return startLaunch(dir, args, wrapper);
}

// A job of yaml(extra) run to its end in a fresh scratch directory `name` holding the corpus.
struct GptRun {
  std::string dir;
  std::optional<int> status;
  std::string out, err;
};

GptRun runGpt(const std::string& name, const std::string& extra,
              const std::vector<std::string>& wrapper = {},
              const std::vector<std::string>& trainArgs = {}) {
  GptRun run;
  run.dir = makeScratchDir(name);
  writeCorpus(run.dir);
  run.status = waitExit(startGpt(run.dir, extra, wrapper, trainArgs), 180s);
  run.out = readFile(run.dir + "/stdout");
  run.err = readFile(run.dir + "/stderr");
  return run;
}

std::map<int, std::string> matches(const std::string& log, const std::regex& pattern) {
  std::map<int, std::string> out;
  for (std::sregex_iterator it(log.begin(), log.end(), pattern), end; it != end; ++it)
    out[std::stoi((*it)[1])] = (*it)[2];
  return out;
}

// Rank 0's and rank 3's parameter hashes: the run resumed in `resumeDir` logged step 6's, equal
// to the straight run's in `straightDir`. Returns the resumed run's hashes (by step) by rank.
std::map<int, std::map<int, std::string>> checkResumedHashes(const std::string& straightDir,
                                                             const std::string& resumeDir) {
  const std::regex hash(R"(step (\d+) param_hash ([0-9a-f]+))");
  std::map<int, std::map<int, std::string>> out;
  for (int rank : {0, 3}) {
    INFO("rank " << rank);
    const std::string log = "/logs/rank-" + std::to_string(rank) + ".log";
    const auto reference = matches(readFile(straightDir + log), hash);
    const auto resumed = matches(readFile(resumeDir + log), hash);
    REQUIRE(resumed.count(6) == 1);
    CHECK(resumed.at(6) == reference.at(6));
    out[rank] = resumed;
  }
  return out;
}

}  // namespace

TEST_CASE("gpt job: a NeoX YAML job at ZeRO 3 trains, evaluates, and resumes bitwise",
          "[gpt][launch]") {
  const GptRun straight = runGpt("gpt-straight",
                                 "flops_profiler: {enabled: true, profile_step: 2, "
                                 "output_file: profile.txt}\n");
  const std::string& straightDir = straight.dir;
  const std::string& out = straight.out;
  INFO(out << straight.err);
  REQUIRE(straight.status == 0);
  const std::regex validation(R"(validation at iteration (\d+) \| lm_loss ([0-9.]+))");
  const auto evals = matches(out, validation);
  REQUIRE(evals.size() == 2);  // iterations 3 and 6: as NeoX, none before the first step
  const std::regex loss(R"(iteration (\d+)/6 \| lm_loss ([0-9.]+))");
  const auto straightLosses = matches(out, loss);
  REQUIRE(straightLosses.size() == 6);
  // The first step's loss is the initial weights' (the update comes after it).
  CHECK(std::stod(evals.at(6)) < std::stod(straightLosses.at(1)) - 0.5);
  REQUIRE(out.find("sample (prompt | generated):") != std::string::npos);
  // The closing efficiency line: the last iteration line's tokens/s times the model's flops per
  // token (6 x the forward MACs: 2 layers x (32 x 96 + 32 x 32 + 2 x 16 x 32 + 32 x 256) + 32 x 384
  // for the padded byte vocabulary = 38912), against this machine's sgemm peak (the loopback
  // nodes are one machine).
  std::smatch efficiency;
  REQUIRE(std::regex_search(
      out, efficiency,
      std::regex(R"(efficiency: ([0-9]+) tokens/s x ([0-9.]+) MFLOP a token = ([0-9.]+) GFLOPS, ([0-9]+)% of this machine's sgemm peak \(([0-9.]+) GFLOPS at ([0-9]+) cores\))")));
  const std::regex lastIteration(R"(iteration 6/6 \| .* tokens/s ([0-9]+))");
  std::smatch last;
  REQUIRE(std::regex_search(out, last, lastIteration));
  CHECK(efficiency[1] == last[1]);
  CHECK(efficiency[2] == "0.233");
  const double gflops = std::stod(efficiency[3]), peak = std::stod(efficiency[5]);
  CHECK(gflops == Approx(std::stod(efficiency[1]) * 233472.0 / 1e9).margin(0.051));
  CHECK(peak > 0.0);
  CHECK(std::stod(efficiency[4]) == Approx(100.0 * gflops / peak).margin(1.0));
  // Both count the CPUs this process may use (its affinity mask), which the ranks inherit.
  CHECK(std::stoi(efficiency[6]) == ds::usableCores());
  // Each loopback node's 2 ranks share its CPUs (OMP_NUM_THREADS, where set, decides instead).
  const char* omp = std::getenv("OMP_NUM_THREADS");
  const int threads = omp && std::atoi(omp) > 0 ? std::atoi(omp) : std::max(1, ds::usableCores() / 2);
  CHECK(out.find(std::string("kernels ") + ds::kernels::kernelIsaName(ds::kernels::bestKernelIsa()) +
                 ", " + std::to_string(threads) + (threads == 1 ? " thread" : " threads") +
                 " per rank\n") != std::string::npos);
  // ds-launch times its start-up, once: until every rank began training, with when every rank
  // had joined and when every rank's first step was done, in that order.
  std::smatch startup;
  REQUIRE(std::regex_search(
      out, startup,
      std::regex(
          R"(ds-launch: start-up ([0-9.]+) s \(ds-launch start until every rank began training; all joined at ([0-9.]+) s, step 1 done by all at ([0-9.]+) s\))")));
  CHECK(std::stod(startup[1]) > 0.0);
  CHECK(std::stod(startup[1]) < 120.0);
  CHECK(std::stod(startup[2]) <= std::stod(startup[1]));
  CHECK(std::stod(startup[1]) <= std::stod(startup[3]));
  CHECK(out.find("ds-launch: start-up", startup.position(0) + 1) == std::string::npos);
  const std::string profile = readFile(straightDir + "/profile.txt");
  CHECK(profile.find("Profile Summary at step 2:") != std::string::npos);
  CHECK(profile.find("world size:                                                   4") !=
        std::string::npos);
  CHECK(profile.find("(query_key_value): Linear(") != std::string::npos);

  const std::string resumeDir = makeScratchDir("gpt-resume");
  writeCorpus(resumeDir);
  const auto first = startGpt(resumeDir, "save: ckpt\nexit-interval: 3\n");
  REQUIRE(waitExit(first, 180s) == 0);
  REQUIRE(readFile(resumeDir + "/ckpt/latest") == "global_step3\n");
  const auto second = startGpt(resumeDir, "load: ckpt\n");
  REQUIRE(waitExit(second, 180s) == 0);
  const std::string resumedOut = readFile(resumeDir + "/stdout");
  REQUIRE(resumedOut.find("resumed from ckpt/global_step3 at iteration 3") != std::string::npos);

  for (const auto& [rank, resumed] : checkResumedHashes(straightDir, resumeDir)) {
    INFO("rank " << rank);
    CHECK(resumed.count(1) == 0);  // it did not start over
  }
  // ds-generate rebuilds the model from the save directory and samples deterministically.
  auto generate = [&](const std::string& args) {
    const std::string cmd = std::string(DS_BIN_DIR) + "/ds-generate " + resumeDir + "/ckpt " +
                            args + " >" + resumeDir + "/gen.out 2>" + resumeDir + "/gen.err";
    const int status = std::system(cmd.c_str());
    return std::pair{WEXITSTATUS(status), readFile(resumeDir + "/gen.out")};
  };
  const auto [genStatus, text] = generate("--prompt 'the quick' --max-new-tokens 12 --seed 5");
  INFO(readFile(resumeDir + "/gen.err"));
  REQUIRE(genStatus == 0);
  CHECK(text.rfind("the quick", 0) == 0);
  CHECK(generate("--prompt 'the quick' --max-new-tokens 12 --seed 5").second == text);
  CHECK(readFile(resumeDir + "/gen.err").find("ckpt/global_step3") != std::string::npos);
  CHECK(generate("--prompt ''").first == 2);

  const auto resumedLosses = matches(resumedOut, loss);
  for (int it : {4, 5, 6}) CHECK(resumedLosses.at(it) == straightLosses.at(it));

  // no-load-optim: the same weights and position, fresh Adam moments: a different iteration 4.
  const auto fresh = startGpt(resumeDir, "load: ckpt\nno-load-optim: true\n");
  REQUIRE(waitExit(fresh, 180s) == 0);
  const std::string freshOut = readFile(resumeDir + "/stdout");
  CHECK(freshOut.find("at iteration 3 (no-load-optim: fresh optimizer states)") !=
        std::string::npos);
  const auto freshLosses = matches(freshOut, loss);
  CHECK(freshLosses.count(1) == 0);
  CHECK(freshLosses.at(4) == straightLosses.at(4));  // the same weights see the same batch
  CHECK(freshLosses.at(5) != straightLosses.at(5));  // but the update differed

  // finetune: the trained weights from iteration 0, so its first step's loss, on the same batch
  // as the straight run's first, is already better.
  const auto tuned = startGpt(resumeDir, "load: ckpt\nfinetune: true\n");
  REQUIRE(waitExit(tuned, 180s) == 0);
  const std::string tunedOut = readFile(resumeDir + "/stdout");
  CHECK(tunedOut.find("finetune: loaded the weights of ckpt/global_step3") != std::string::npos);
  const auto tunedLosses = matches(tunedOut, loss);
  REQUIRE(tunedLosses.count(1) == 1);
  CHECK(std::stod(tunedLosses.at(1)) < std::stod(straightLosses.at(1)) - 0.3);  // trained weights
}

TEST_CASE("gpt job: NeoX's checkpoint schedule saves at its iterations and keeps the last N",
          "[gpt][launch]") {
  // log factor 2 over 6 iterations: 1, 2, 4, and 6 as the last; extras 0 (before training) and 3.
  const GptRun run = runGpt("gpt-checkpoint-schedule",
                            "save: ckpt\ncheckpoint-factor: 2\ncheckpoint-scale: log\n"
                            "extra-save-iters: [3, 0]\nkeep-last-n-checkpoints: 2\n");
  INFO(run.out << run.err);
  REQUIRE(run.status == 0);
  std::vector<int> saved;
  const std::regex save(R"(saved checkpoint ckpt/global_step(\d+))");
  for (std::sregex_iterator it(run.out.begin(), run.out.end(), save), end; it != end; ++it)
    saved.push_back(std::stoi((*it)[1]));
  CHECK(saved == std::vector<int>{0, 1, 2, 3, 4, 6});
  std::vector<std::string> deleted;
  const std::regex deletion(R"(keep-last-n-checkpoints: deleted ckpt/(global_step\d+))");
  for (std::sregex_iterator it(run.out.begin(), run.out.end(), deletion), end; it != end; ++it)
    deleted.push_back((*it)[1]);
  CHECK(deleted ==
        std::vector<std::string>{"global_step0", "global_step1", "global_step2", "global_step3"});
  std::set<std::string> left;
  for (const auto& e : std::filesystem::directory_iterator(run.dir + "/ckpt"))
    left.insert(e.path().filename().string());
  CHECK(left ==
        std::set<std::string>{"global_step4", "global_step6", "latest", "neox_config.json"});
  CHECK(readFile(run.dir + "/ckpt/latest") == "global_step6\n");
  // What is kept is complete: a run resumes from it.
  const auto resumed = startGpt(run.dir, "load: ckpt\n");
  REQUIRE(waitExit(resumed, 180s) == 0);
  CHECK(readFile(run.dir + "/stdout").find("resumed from ckpt/global_step6 at iteration 6") !=
        std::string::npos);
}

TEST_CASE("gpt job: each tokenizer's data (ds-preprocess), training, then ds-generate",
          "[gpt][launch]") {
  struct Case {
    const char* type;
    std::string vocabFile, mergeFile;  // HF/SPM: the merge-file local_setup.yml would give
    std::string line;                  // the corpus, one document per repetition
    const char* prompt;
  };
  const std::string golden = std::string(DS_SOURCE_DIR) + "/test/golden/";
  const std::string bpeDir = makeScratchDir("gpt-bpe-files");
  const SmallBpe bpe = writeSmallBpe(bpeDir);
  // HFTokenizer and SPMTokenizer ignore merge-file, as NeoX does (its local_setup.yml sets
  // GPT-2's for every config).
  const Case cases[] = {
      {"GPT2BPETokenizer", bpe.vocabFile, bpe.mergeFile, "abab aba the lazy dog said ab ", "abab"},
      {"HFTokenizer", golden + "hf_tokenizer.json", "data/gpt2-merges.txt",
       "The tokenizer reads caf\xC3\xA9s ", "The tokenizer"},
      {"SPMTokenizer", golden + "spm_llama_like.model", "data/gpt2-merges.txt",
       "The tokenizer splits digits and caf\xC3\xA9s ", "The tokenizer"},
  };
  for (const Case& k : cases) {
    DYNAMIC_SECTION(k.type) {
      const std::string dir = makeScratchDir("gpt-tokenizer");
      std::string text;
      for (int d = 0; d < 30; ++d) text += k.line + std::to_string(d * 37) + "\n\n";
      writeFile(dir + "/corpus.txt", text);
      std::filesystem::create_directories(dir + "/data");
      std::string pre = "cd " + dir + " && " + DS_BIN_DIR +
                        "/ds-preprocess --input corpus.txt --output-prefix data/tok "
                        "--append-eod --tokenizer-type " +
                        k.type + " --vocab-file " + k.vocabFile;
      if (std::string(k.type) == "GPT2BPETokenizer") pre += " --merge-file " + k.mergeFile;
      pre += " >pre.out 2>&1";
      INFO(readFile(dir + "/pre.out"));
      REQUIRE(std::system(pre.c_str()) == 0);
      writeFile(dir + "/hostfile", kHostfile);
      std::string config =
          yaml("save: ckpt\nvocab-file: " + k.vocabFile + "\nmerge-file: " + k.mergeFile + "\n");
      config = std::regex_replace(config, std::regex("ByteTokenizer"), k.type);
      config = std::regex_replace(config, std::regex("data/corpus"), "data/tok_text_document");
      writeFile(dir + "/gpt.yml", config);
      const auto job = startLaunch(dir, {"--hostfile", "hostfile", "--master_port", "0",
                                         "--log_dir", "logs", "train", "--config", "gpt.yml"});
      const auto status = waitExit(job, 180s);
      INFO(readFile(dir + "/stdout") << readFile(dir + "/stderr"));
      REQUIRE(status == 0);
      CHECK(readFile(dir + "/stdout").find("validation at iteration 6") != std::string::npos);
      const std::string gen = "cd " + dir + " && " + DS_BIN_DIR + "/ds-generate ckpt --prompt '" +
                              k.prompt + "' --max-new-tokens 5 >gen.out 2>&1";
      INFO(readFile(dir + "/gen.out"));
      CHECK(std::system(gen.c_str()) == 0);
      CHECK(readFile(dir + "/gen.out").find(k.prompt) != std::string::npos);
      std::filesystem::remove_all(dir);
    }
  }
  std::filesystem::remove_all(bpeDir);
}

TEST_CASE("gpt job: wall_clock_breakdown prints DeepSpeed's timer line at steps_per_print",
          "[gpt][launch]") {
  const std::string monitor = "csv_monitor: {enabled: true, output_path: monitor, job_name: run}\n";
  // Stage 1 reduce-scatters the gradients at the boundary, inside backward_allreduce; stage 3
  // reduces them during backward, so backward_allreduce is only the wait for the last ones.
  // offload: stage 3 with the optimizer states and the parameters on NVMe (every layer swapped).
  struct Case {
    int stage;
    bool offload;
  };
  for (const Case c : {Case{1, false}, Case{3, false}, Case{3, true}}) {
    const int stage = c.stage;
    DYNAMIC_SECTION("ZeRO stage " << stage << (c.offload ? " with nvme offload" : "")) {
      const std::string dir = makeScratchDir("gpt-wall-clock");
      writeCorpus(dir);
      writeFile(dir + "/hostfile", kHostfile);
      std::filesystem::create_directories(dir + "/swap");
      // Wider, in sub-groups of 10k elements: enough bytes that every swap takes measurable time,
      // and reads that the loop waits for (the first group's is prefetched during backward).
      const std::string offload =
          c.offload ? "  sub_group_size: 10000\n"
                      "  offload_optimizer: {device: nvme, nvme_path: swap}\n"
                      "  offload_param: {device: nvme, nvme_path: swap, max_in_cpu: 0}\n"
                    : "";
      std::string config = std::regex_replace(
          yaml(offload + "wall_clock_breakdown: true\nsteps_per_print: 3\n" + monitor),
          std::regex("stage: 3"), "stage: " + std::to_string(stage));
      if (c.offload)
        config = std::regex_replace(config, std::regex("hidden-size: 32"), "hidden-size: 128");
      // steps_per_print, not log-interval (1 here), sets the cadence: iterations 3 and 6.
      writeFile(dir + "/gpt.yml", config);
      const auto job = startLaunch(dir, {"--hostfile", "hostfile", "--master_port", "0",
                                         "--log_dir", "logs", "train", "--config", "gpt.yml"});
      const auto status = waitExit(job, 180s);
      const std::string out = readFile(dir + "/stdout");
      INFO(out << readFile(dir + "/stderr"));
      REQUIRE(status == 0);
      REQUIRE(out.find("ZeRO stage " + std::to_string(stage)) != std::string::npos);
      const std::regex timer(
          R"((\[rank \d+\]) time \(ms\) \| forward: ([0-9.]+) \| backward: ([0-9.]+) \| )"
          R"(backward_allreduce: ([0-9.]+) \| step: ([0-9.]+)\n)");
      std::vector<size_t> at;
      for (std::sregex_iterator it(out.begin(), out.end(), timer), end; it != end; ++it) {
        const std::smatch& m = *it;
        CHECK(m[1] == "[rank 0]");  // DeepSpeed logs its timers on rank 0 only
        CHECK(std::stod(m[2]) > 0.0);
        CHECK(std::stod(m[3]) > 0.0);
        CHECK(std::stod(m[4]) >= (stage == 1 ? 0.01 : 0.0));
        CHECK(std::stod(m[5]) > 0.0);
        at.push_back(static_cast<size_t>(m.position(0)));
      }
      REQUIRE(at.size() == 2);
      // The ZeRO optimizer's own line after every update, on rank 0, with the fields of
      // DeepSpeed's stage_1_and_2.py or stage3.py, the swaps' only with NVMe offload.
      const std::string ms = R"(: ([0-9.]+))";
      const std::string optimizerFields = stage == 3 ? "optimizer_step" + ms
                                                     : "optimizer_allgather" + ms +
                                                           R"( \| optimizer_gradients)" + ms +
                                                           R"( \| optimizer_step)" + ms;
      const std::string swapFields =
          c.offload ? R"( \| optimizer_swap_in_state)" + ms + R"( \| optimizer_swap_out_state)" +
                          ms + R"( \| param_swap_in)" + ms + R"( \| param_swap_out)" + ms
                    : "";
      const std::regex optimizerTimer(R"((\[rank \d+\]) time \(ms\) \| )" + optimizerFields +
                                      swapFields + "\n");
      size_t optimizerLines = 0;
      std::vector<double> swapTotals(4, 0.0);
      for (std::sregex_iterator it(out.begin(), out.end(), optimizerTimer), end; it != end; ++it) {
        const std::smatch& m = *it;
        CHECK(m[1] == "[rank 0]");
        for (size_t i = 2; i < m.size(); ++i) CHECK(std::stod(m[i]) >= 0.0);
        CHECK(std::stod(m[stage == 3 ? 2 : 4]) > 0.0);  // the update itself
        if (c.offload)
          for (size_t i = 0; i < 4; ++i) swapTotals[i] += std::stod(m[3 + i]);
        ++optimizerLines;
      }
      CHECK(optimizerLines == 6);
      // Every kind of swap took time over the run: optimizer states in and out, the fp32 shard
      // out. The shard's swap-in is only the wait for reads issued ahead (during backward and
      // while earlier sub-groups update); on an idle machine they are all done in time, and six
      // waits under 5 us print 0.00. That the shard is read at all is counted, not timed, by
      // test_param_offload_knobs (Engine::parameterOffloadStats).
      if (c.offload)
        for (size_t i : {0, 1, 3}) CHECK(swapTotals[i] > 0.0);
      size_t lines = 0;  // and no timer line of another format
      for (size_t p = out.find("time (ms)"); p != std::string::npos;
           p = out.find("time (ms)", p + 1))
        ++lines;
      CHECK(lines == 2 + 6);
      // Each line is the step just taken, printed inside it as DeepSpeed's engine.step() does:
      // after iteration 2's line and before iteration 3's, after 5's and before 6's.
      CHECK(out.find("iteration 2/6") < at[0]);
      CHECK(out.find("iteration 3/6") > at[0]);
      CHECK(out.find("iteration 5/6") < at[1]);
      CHECK(out.find("iteration 6/6") > at[1]);
      // The monitors get DeepSpeed's timer events every step (16 samples a step); the
      // optimizer's timers, as in DeepSpeed, never.
      for (const std::string name : {"forward", "backward", "backward_allreduce", "step"})
        CHECK(readFile(dir + "/monitor/run/Train_Samples_elapsed_time_ms_" + name + ".csv")
                  .starts_with("step,elapsed_time_ms_" + name + "\r\n16,"));
      for (const auto& entry : std::filesystem::directory_iterator(dir + "/monitor/run"))
        CHECK(entry.path().filename().string().find("optimizer") == std::string::npos);
    }
  }
  SECTION("off: no timer line and no timer events") {
    const GptRun run = runGpt("gpt-no-wall-clock", "steps_per_print: 3\n" + monitor);
    INFO(run.out << run.err);
    REQUIRE(run.status == 0);
    CHECK(run.out.find("iteration 6/6") != std::string::npos);
    CHECK(run.out.find("time (ms)") == std::string::npos);
    CHECK(std::filesystem::exists(run.dir + "/monitor/run/Train_Samples_train_loss.csv"));
    CHECK(
        !std::filesystem::exists(run.dir + "/monitor/run/Train_Samples_elapsed_time_ms_step.csv"));
  }
}

TEST_CASE("gpt job: two datasets blended by weight train, and a resumed run continues the blend",
          "[gpt][launch]") {
  // NeoX's per-split lists instead of data-path: train draws 3:1 from two datasets (the greedy
  // blending index), validation reads a third; the order is a function of the config alone, so a
  // run stopped at iteration 3 and resumed ends bitwise where the straight run ends.
  auto start = [](const std::string& dir, const std::string& extra) {
    writeByteCorpus(dir + "/data/a", 30, [](int d) { return 2 + d % 3; });
    writeByteCorpus(dir + "/data/b", 12, [](int d) { return 5 + d % 2; });
    writeByteCorpus(dir + "/data/v", 8, [](int d) { return 3 + d % 2; });
    std::string config = std::regex_replace(yaml(extra), std::regex("data-path: data/corpus\n"),
                                            "train-data-paths: [data/a, data/b]\n"
                                            "train-data-weights: [3, 1]\n"
                                            "valid-data-paths: [data/v]\n"
                                            "test-data-paths: []\n");
    config = std::regex_replace(config, std::regex("split: \"90,10,0\"\n"), "");
    writeFile(dir + "/hostfile", kHostfile);
    writeFile(dir + "/gpt.yml", config);
    return startLaunch(dir, {"--hostfile", "hostfile", "--master_port", "0", "--log_dir", "logs",
                             "train", "--config", "gpt.yml", "--print_param_hash"});
  };
  const std::string straightDir = makeScratchDir("gpt-blend");
  const auto straight = start(straightDir, "");
  const auto straightStatus = waitExit(straight, 180s);
  const std::string out = readFile(straightDir + "/stdout");
  INFO(out << readFile(straightDir + "/stderr"));
  REQUIRE(straightStatus == 0);
  // 6 iterations x 16 samples = 96: ceil(96 x .75 x 1.005) = 73, ceil(96 x .25 x 1.005) = 25.
  CHECK(out.find("data: train blend of data/a (weight 0.75, 73 samples") != std::string::npos);
  CHECK(out.find(", data/b (weight 0.25, 25 samples") != std::string::npos);
  CHECK(out.find("validation blend of data/v (weight 1,") != std::string::npos);
  const std::regex loss(R"(iteration (\d+)/6 \| lm_loss ([0-9.]+))");
  const auto straightLosses = matches(out, loss);
  REQUIRE(straightLosses.size() == 6);
  CHECK(matches(out, std::regex(R"(validation at iteration (\d+) \| lm_loss ([0-9.]+))")).size() ==
        2);

  const std::string resumeDir = makeScratchDir("gpt-blend-resume");
  REQUIRE(waitExit(start(resumeDir, "save: ckpt\nexit-interval: 3\n"), 180s) == 0);
  const auto second = start(resumeDir, "load: ckpt\n");
  REQUIRE(waitExit(second, 180s) == 0);
  const std::string resumedOut = readFile(resumeDir + "/stdout");
  INFO(resumedOut);
  REQUIRE(resumedOut.find("resumed from ckpt/global_step3 at iteration 3") != std::string::npos);
  const auto resumedLosses = matches(resumedOut, loss);
  for (int it : {4, 5, 6}) CHECK(resumedLosses.at(it) == straightLosses.at(it));
  checkResumedHashes(straightDir, resumeDir);
}

namespace {

// A label dataset beside the byte corpus at `text`: each token's label is the token itself where
// keep(position in its document) holds, else NeoX's -100 (masked).
void writeLabels(const std::string& text, const std::string& labels,
                 const std::function<bool(size_t)>& keep) {
  const ds::runtime::IndexedDataset data(text);
  ds::runtime::IndexedDatasetWriter w(labels, ds::runtime::TokenType::Int32);
  for (size_t s = 0; s < data.sequences(); ++s) {
    std::vector<int32_t> ids = data.read(s);
    for (size_t k = 0; k < ids.size(); ++k)
      if (!keep(k)) ids[k] = -100;
    w.addSequence(ids);
    w.endDocument();
  }
  w.finish();
}

}  // namespace

TEST_CASE("gpt job: label datasets give the targets and mask the loss where they are negative",
          "[gpt][launch]") {
  // The blend of the test above with train-/valid-label-data-paths. Labels equal to the text
  // train bitwise as the plain run (the labels are read at the text's positions and shifted as
  // the text is); labels masking all but every 9th token train on those alone: other losses.
  auto start = [](const std::string& dir, const std::function<bool(size_t)>* keep) {
    writeByteCorpus(dir + "/data/a", 30, [](int d) { return 2 + d % 3; });
    writeByteCorpus(dir + "/data/b", 12, [](int d) { return 5 + d % 2; });
    writeByteCorpus(dir + "/data/v", 8, [](int d) { return 3 + d % 2; });
    std::string lists =
        "train-data-paths: [data/a, data/b]\ntrain-data-weights: [3, 1]\n"
        "valid-data-paths: [data/v]\ntest-data-paths: []\n";
    if (keep) {
      for (const char* name : {"a", "b", "v"})
        writeLabels(dir + "/data/" + name, dir + "/data/" + name + "_label", *keep);
      lists +=
          "train-label-data-paths: [data/a_label, data/b_label]\n"
          "valid-label-data-paths: [data/v_label]\n";
    }
    std::string config =
        std::regex_replace(yaml(""), std::regex("data-path: data/corpus\n"), lists);
    config = std::regex_replace(config, std::regex("split: \"90,10,0\"\n"), "");
    writeFile(dir + "/hostfile", kHostfile);
    writeFile(dir + "/gpt.yml", config);
    return startLaunch(dir, {"--hostfile", "hostfile", "--master_port", "0", "--log_dir", "logs",
                             "train", "--config", "gpt.yml", "--print_param_hash"});
  };
  const std::regex loss(R"(iteration (\d+)/6 \| lm_loss ([0-9.]+))");
  const std::regex validation(R"(validation at iteration (\d+) \| lm_loss ([0-9.]+))");
  struct Run {
    std::map<int, std::string> losses, validation;
  };
  auto run = [&](const std::string& name, const std::function<bool(size_t)>* keep) {
    const std::string dir = makeScratchDir(name);
    const auto status = waitExit(start(dir, keep), 180s);
    const std::string out = readFile(dir + "/stdout");
    INFO(out << readFile(dir + "/stderr"));
    REQUIRE(status == 0);
    if (keep) CHECK(out.find("(weight 0.75, 73 samples, ") != std::string::npos);
    if (keep) CHECK(out.find("with labels data/a_label") != std::string::npos);
    Run r{matches(out, loss), matches(out, validation)};
    REQUIRE(r.losses.size() == 6);
    REQUIRE(r.validation.size() == 2);
    return r;
  };
  const Run plain = run("gpt-labels-plain", nullptr);
  const std::function<bool(size_t)> all = [](size_t) { return true; };
  const Run same = run("gpt-labels-all", &all);
  CHECK(same.losses == plain.losses);
  CHECK(same.validation == plain.validation);
  const std::function<bool(size_t)> few = [](size_t k) { return k % 9 == 4; };
  const Run masked = run("gpt-labels-few", &few);
  for (int it = 1; it <= 6; ++it) {
    INFO("iteration " << it);
    CHECK(masked.losses.at(it) != plain.losses.at(it));
    CHECK(std::isfinite(std::stod(masked.losses.at(it))));
  }
  CHECK(masked.validation.at(3) != plain.validation.at(3));
  CHECK(std::stod(masked.losses.at(6)) < std::stod(masked.losses.at(1)));  // it learns

  // A label dataset one document short of its text: ds-config check and the job refuse it,
  // naming both files.
  const std::string dir = makeScratchDir("gpt-labels-misaligned");
  REQUIRE(waitExit(start(dir, &few), 180s) == 0);  // writes the data and config; trains
  const std::string check = std::string(DS_BIN_DIR) + "/ds-config check " + dir + "/gpt.yml";
  const CommandOutcome good = runCommand("cd " + dir + " && " + check);
  INFO(good.output);
  CHECK(good.status == 0);
  writeByteCorpus(dir + "/data/b_label", 11, [](int d) { return 5 + d % 2; });
  const CommandOutcome bad = runCommand("cd " + dir + " && " + check);
  CHECK(bad.status != 0);
  CHECK_THAT(bad.output, Catch::Contains("train-label-data-paths: label dataset data/b_label does "
                                         "not line up with its text dataset data/b: 11 "
                                         "documents against 12"));
  writeFile(dir + "/hostfile", kHostfile);
  const auto refused = startLaunch(dir, {"--hostfile", "hostfile", "--master_port", "0",
                                         "--log_dir", "logs", "train", "--config", "gpt.yml"});
  CHECK(waitExit(refused, 180s) != 0);
  CHECK_THAT(readFile(dir + "/stdout") + readFile(dir + "/stderr"),
             Catch::Contains("label dataset data/b_label does not line up with its text dataset "
                             "data/b"));
}

TEST_CASE(
    "gpt job: with DS_DEVICE_MEMORY=guarded the model's passes run over device memory the host "
    "cannot touch, and every step's parameters equal the plain run's",
    "[gpt][device]") {
  // The guarded CPU backend stands in for a GPU's separate memory (kernels/accelerator.h's
  // jobAccelerator): the ranks' Gpt, the engine's bridge and the training loop run as they would
  // with --device cuda, and any host read of device memory would kill a rank.
  const GptRun plain = runGpt("gpt-device-plain", "");
  REQUIRE(plain.status == 0);
  const GptRun guarded = runGpt("gpt-device-guarded", "", {"env", "DS_DEVICE_MEMORY=guarded"});
  INFO(guarded.out << guarded.err);
  REQUIRE(guarded.status == 0);
  CHECK_THAT(readFile(guarded.dir + "/logs/rank-0.log"),
             Catch::Contains("device: the model's passes on guarded cpu"));
  CHECK(checkResumedHashes(plain.dir, guarded.dir).at(0).size() == 6);
  const std::regex loss(R"(iteration (\d+)/6 \| lm_loss ([0-9.]+))");
  CHECK(matches(guarded.out, loss) == matches(plain.out, loss));
  CHECK(matches(guarded.out, loss).size() == 6);
}

TEST_CASE("gpt job: --device cuda where no GPU is visible fails at the ranks, saying why",
          "[gpt][device]") {
  std::string why;
  if (skipUnless(!ds::kernels::acceleratorAvailable(ds::DeviceKind::Cuda, &why),
                 "a GPU is visible here (scripts/gpu-check is the GPU's check)"))
    return;
  const GptRun run = runGpt("gpt-device-cuda", "", {}, {"--device", "cuda"});
  CHECK(run.status != 0);
  CHECK_THAT(readFile(run.dir + "/logs/rank-0.log"), Catch::Contains(why));
}
