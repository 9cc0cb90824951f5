// Bad and hostile input through the real binaries: every case ends with exit 2, a message naming
// the place, no crash signal, within bounded time and memory (timeout, ulimit -v), and nothing
// started.
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "test/run_command.h"
#include "test/scratch_dir.h"

namespace {

using ds::test::CommandOutcome;
using Outcome = CommandOutcome;  // status 124: timed out

// Runs `command` in `dir` under a 20 s timeout and a 4 GiB address-space limit.
Outcome run(const std::string& dir, const std::string& command) {
  return ds::test::runCommand("cd " + dir + " && ulimit -v 4194304 && timeout 20 " + command,
                              1 << 16);
}

void writeBytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

struct Case {
  std::string name, file, content, message;
};

// Each case's file, given to ds-config check and to ds-launch (hostfile in `dir`): exit 2 with
// the message, and no rank started.
void checkRefusedByCheckAndLaunch(const std::string& dir, const std::vector<Case>& cases) {
  const std::string bin = DS_BIN_DIR;
  for (const Case& c : cases) {
    INFO(c.name);
    writeBytes(dir + "/" + c.file, c.content);
    for (const std::string& command :
         {bin + "/ds-config check " + c.file,
          bin + "/ds-launch -H hostfile --master_port 0 train --config " + c.file}) {
      const Outcome outcome = run(dir, command);
      INFO(command << "\n" << outcome.output.substr(0, 2000));
      CHECK(outcome.status == 2);
      CHECK(outcome.output.find(c.message) != std::string::npos);
      CHECK(outcome.output.find("[rank") == std::string::npos);
    }
  }
}

}  // namespace

TEST_CASE("robustness: hostile configs through ds-config and ds-launch exit 2, named") {
  const std::string dir = ds::test::makeScratchDir("bad-configs");
  const std::string bin = DS_BIN_DIR;
  writeBytes(dir + "/hostfile", "127.0.0.1 slots=1\n");
  const std::vector<Case> cases = {
      {"number beyond double", "big.json", R"({"train_batch_size": 1e400})",
       "big.json: invalid JSON"},
      {"deep nesting", "deep.json", std::string(100000, '[') + std::string(100000, ']'),
       "nested more than 64 levels deep"},
      {"NUL and garbage", "nul.json", std::string(R"({"train_batch_size": 4})") + '\0' + "garbage",
       "a NUL byte at offset 23"},
      {"not UTF-8", "utf.json", "{\"train_batch_size\": 4, \"\xff\": 1}", "utf.json: invalid JSON"},
      {"switched-on feature", "tb.json", R"({"train_batch_size": 4, "wandb": {"enabled": true}})",
       "wandb: the Weights & Biases monitor is not implemented"},
      {"elastic placeholder", "el.json",
       R"({"train_batch_size": 4, "elasticity": {"enabled": true, "max_train_batch_size": "seqlen", "micro_batch_sizes": [2]}})",
       "elasticity.max_train_batch_size: expected an integer, got \"seqlen\""},
  };
  checkRefusedByCheckAndLaunch(dir, cases);
  // A device file is refused unread, a large file before it is read.
  const Outcome zero = run(dir, bin + "/ds-config check /dev/zero");
  CHECK(zero.status == 2);
  CHECK(zero.output.find("/dev/zero: cannot read DeepSpeed config: is a character device") !=
        std::string::npos);
  writeBytes(dir + "/huge.json", "{");
  std::filesystem::resize_file(dir + "/huge.json", size_t{1} << 30);  // sparse
  const Outcome huge = run(dir, bin + "/ds-config check huge.json");
  CHECK(huge.status == 2);
  CHECK(huge.output.find("huge.json: larger than 16 MiB") != std::string::npos);
}

TEST_CASE("robustness: hostile hostfiles exit 2 naming the line, before anything is built") {
  const std::string dir = ds::test::makeScratchDir("bad-hostfiles");
  const std::string bin = DS_BIN_DIR;
  const std::vector<Case> cases = {
      {"ssh option", "h1", "w0 slots=1\n-oProxyCommand=touch slots=1\n",
       "h1:2: a host name may not start with '-'"},
      {"pdsh list", "h2", "a,b slots=1\n", "h2:1: a host name may not contain ','"},
      {"pdsh range", "h3", "n[1-4] slots=1\n", "h3:1: a host name may not contain '['"},
      {"control byte", "h4", "w\x07 slots=1\n", "h4:1: host name contains control byte 7"},
      {"not UTF-8", "h5", "w\xff slots=1\n", "h5:1: host name is not valid UTF-8"},
      {"a 1 MB name", "h6", std::string(1 << 20, 'w') + " slots=1\n",
       "h6:1: host name of 1048576 bytes"},
      {"2^31-1 slots", "h7", "w0 slots=2147483647\n",
       "h7:1: the hostfile's slots add up to more than 65536"},
      {"ten million slots", "h8", "w0 slots=10000000\n", "h8:1: the hostfile's slots add up"},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    writeBytes(dir + "/" + c.file, c.content);
    for (const std::string& extra : {std::string("--dry-run --json"), std::string("--launcher ssh"),
                                     std::string("--launcher pdsh --dry-run")}) {
      const Outcome outcome =
          run(dir, bin + "/ds-launch -H " + c.file + " " + extra + " -- /bin/true");
      INFO(extra << "\n" << outcome.output.substr(0, 2000));
      CHECK(outcome.status == 2);
      CHECK(outcome.output.find(c.message) != std::string::npos);
    }
  }
}

TEST_CASE("robustness: bad rank variables and flags of ds-worker exit 2, named") {
  const std::string dir = ds::test::makeScratchDir("bad-worker");
  const std::string bin = DS_BIN_DIR;
  const Outcome overflow =
      run(dir, "env DS_JOB_TOKEN=token-0123456789abcdef OMPI_COMM_WORLD_RANK=4294967296 " + bin +
                   "/ds-worker --coordinator 127.0.0.1:1 --rank_from_env");
  CHECK(overflow.status == 2);
  CHECK(overflow.output.find("OMPI_COMM_WORLD_RANK=4294967296 is not a rank number") !=
        std::string::npos);
  const Outcome bogus = run(dir, bin + "/ds-worker --bogus");
  CHECK(bogus.status == 2);
  const Outcome include =
      run(dir, bin + "/ds-launch --include localhost:0000000001 --dry-run -- /bin/true");
  INFO(include.output);
  CHECK(include.output.find("not a slot number") == std::string::npos);
}

namespace {

const char* kGptModelYaml =
    "num-layers: 2\nhidden-size: 32\nnum-attention-heads: 2\nseq-length: 16\n"
    "max-position-embeddings: 16\ndata-path: data/x\ntrain-iters: 10\n";
const std::string kGptYaml = std::string(kGptModelYaml) + "tokenizer-type: ByteTokenizer\n";

// No control byte but newline and tab reaches the terminal (error messages quote input text).
bool printable(const std::string& output) {
  for (const char c : output)
    if ((static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t') || c == 0x7f) return false;
  return true;
}

}  // namespace

TEST_CASE("robustness: 100,000-deep JSON in any file a user gives is refused, never crashed on") {
  const std::string dir = ds::test::makeScratchDir("deep-json");
  const std::string bin = DS_BIN_DIR;
  std::string vocab;  // {"a": {"a": ... 1 ...}}: an object, so the reader looks at its values
  for (int i = 0; i < 100000; ++i) vocab += "{\"a\": ";
  vocab += "1" + std::string(100000, '}');
  writeBytes(dir + "/vocab.json", vocab);
  writeBytes(dir + "/merges.txt", "#version: 0.2\n");
  const std::string bpe =
      "tokenizer-type: GPT2BPETokenizer\nvocab-file: vocab.json\nmerge-file: merges.txt\n";
  writeBytes(dir + "/bpe.yml", std::string(kGptModelYaml) + "batch-size: 1\n" + bpe);
  writeBytes(dir + "/deep.json", "{\"train_batch_size\": 4, \"x\": " + std::string(100000, '[') +
                                     std::string(100000, ']') + "}");
  writeBytes(dir + "/inline.yml",
             std::string(kGptYaml) + "batch-size: 1\ndeepspeed_config: deep.json\n");
  writeBytes(dir + "/hostfile", "127.0.0.1 slots=1\n");
  writeBytes(dir + "/c.jsonl", "{\"text\": \"x\", \"meta\": " + std::string(100000, '[') +
                                   std::string(100000, ']') + "}\n");
  std::filesystem::create_directories(dir + "/ck");
  writeBytes(dir + "/ck/neox_config.json",
             R"({"num-layers": 1, "hidden-size": 16, "num-attention-heads": 2, "seq-length": 8,
                 "max-position-embeddings": 8, "data-path": "x", "train-iters": 1,
                 "batch-size": 1, "tokenizer-type": "GPT2BPETokenizer",
                 "vocab-file": "vocab.json", "merge-file": "merges.txt"})");
  std::filesystem::create_directories(dir + "/ck2");
  writeBytes(dir + "/ck2/neox_config.json", vocab);
  struct Command {
    std::string line, message;
  };
  const std::vector<Command> commands = {
      {"ds-config check bpe.yml", "vocab.json: nested more than 64 levels deep"},
      {"ds-config check deep.json", "deep.json: nested more than 64 levels deep"},
      {"ds-config check inline.yml", "deep.json: nested more than 64 levels deep"},
      {"ds-launch -H hostfile --master_port 0 train --config deep.json",
       "deep.json: nested more than 64 levels deep"},
      {"ds-launch -H hostfile --master_port 0 train --config inline.yml",
       "deep.json: nested more than 64 levels deep"},
      {"ds-preprocess --input c.jsonl --output-prefix o/b",
       "c.jsonl:1: nested more than 256 levels deep"},
      {"ds-preprocess --input c.jsonl --output-prefix o/b --tokenizer-type GPT2BPETokenizer "
       "--vocab-file vocab.json --merge-file merges.txt",
       "vocab.json: nested more than 64 levels deep"},
      {"ds-generate ck --prompt hi", "vocab.json: nested more than 64 levels deep"},
      {"ds-generate ck2 --prompt hi", "ck2/neox_config.json: nested more than 128"},
  };
  for (const Command& c : commands) {
    const Outcome outcome = run(dir, bin + "/" + c.line);
    INFO(c.line << "\n" << outcome.output.substr(0, 2000));
    CHECK(outcome.status == 2);
    CHECK(outcome.output.find(c.message) != std::string::npos);
    CHECK(outcome.output.find("levels deep") != std::string::npos);
  }
  // Every rank reads the vocabulary itself: each refuses it, none crashes.
  const Outcome ranks =
      run(dir, bin + "/ds-launch -H hostfile --master_port 0 train --config bpe.yml");
  INFO(ranks.output.substr(0, 4000));
  CHECK(ranks.status != 0);
  CHECK(ranks.status < 128);
  CHECK(ranks.output.find("vocab.json: nested more than 64 levels deep") != std::string::npos);
  CHECK(ranks.output.find("signal") == std::string::npos);
}

TEST_CASE("robustness: configs the run cannot allocate or split are refused by the check") {
  const std::string dir = ds::test::makeScratchDir("unbounded-configs");
  const std::string bin = DS_BIN_DIR;
  writeBytes(dir + "/hostfile", "127.0.0.1 slots=1\n");
  std::string bomb = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n";
  for (char c = 'b'; c <= 'i'; ++c) {
    bomb += std::string(1, c) + ": &" + c + " [";
    for (int i = 0; i < 9; ++i) bomb += std::string(i ? ", " : "") + "*" + char(c - 1);
    bomb += "]\n";
  }
  const std::vector<Case> cases = {
      {"alias bomb", "bomb.yml", bomb, "bomb.yml:6: f: the file expands to more than 100000"},
      // Beyond any machine (ds-config check warns of what only this machine cannot hold).
      {"micro-batch", "micro.yml", std::string(kGptYaml) + "batch-size: 1e10\n",
       "batch-size 10000000000 x seq-length 16 tokens needs at least"},
      {"accumulation", "gas.yml",
       std::string(kGptYaml) + "batch-size: 4\ngradient_accumulation_steps: 1e11\n",
       "train-iters 10 x train_batch_size 400000000000"},
      {"eval-iters", "eval.yml",
       std::string(kGptYaml) + "batch-size: 4\neval-iters: 1e12\neval-interval: 1\n",
       "eval-iters 1000000000000 x train_batch_size per evaluation"},
      {"all-zero split", "zero.yml", std::string(kGptYaml) + "batch-size: 4\nsplit: 0,0,0\n",
       "split \"0,0,0\": expected 1 to 3 comma-separated weights with a positive sum"},
      {"negative split", "neg.yml", std::string(kGptYaml) + "batch-size: 4\nsplit: -1,2,3\n",
       "split \"-1,2,3\": \"-1\" is not a non-negative number"},
      {"key twice", "twice.yml", std::string(kGptYaml) + "batch-size: 4\nbatch-size: 8\n",
       "twice.yml:10: batch-size is already set on line 9 of this file"},
  };
  checkRefusedByCheckAndLaunch(dir, cases);
  // Ranks on other machines: the launcher's memory says nothing of theirs, so it plans the job
  // (each rank checks its own at its start).
  writeBytes(dir + "/remote", "node-a slots=1\nnode-b slots=1\n");
  const Outcome remote = run(dir, bin + "/ds-launch -H remote --dry_run train --config micro.yml");
  INFO(remote.output);
  CHECK(remote.status == 0);
}

TEST_CASE("robustness: hostfile quirks: slots in other notations, a BOM, escape bytes") {
  const std::string dir = ds::test::makeScratchDir("hostfile-quirks");
  const std::string bin = DS_BIN_DIR;
  const std::vector<Case> cases = {
      {"exponent", "h1", "w0 slots=1e3\n", "h1:1: slots=1e3: expected a whole number"},
      {"hex", "h2", "w0 slots=1\nw1 slots=0x10\n", "h2:2: slots=0x10: expected a whole number"},
      {"terminal escapes", "h3", "\x1b]0;owned\x07\x1b[2J w0 slotz=1\n",
       "h3:1: bad entry \"\\x1b]0;owned\\x07\\x1b[2J w0 slotz=1\""},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    writeBytes(dir + "/" + c.file, c.content);
    const Outcome outcome = run(dir, bin + "/ds-launch -H " + c.file + " --dry-run -- /bin/true");
    INFO(outcome.output);
    CHECK(outcome.status == 2);
    CHECK(outcome.output.find(c.message) != std::string::npos);
    CHECK(printable(outcome.output));
  }
  // A byte-order mark is not part of the first host's name: 127.0.0.1 stays a loopback host.
  writeBytes(dir + "/bom",
             "\xEF\xBB\xBF"
             "127.0.0.1 slots=1\n");
  const Outcome bom = run(dir, bin + "/ds-launch -H bom --dry-run --json -- /bin/true");
  INFO(bom.output);
  CHECK(bom.status == 0);
  CHECK(bom.output.find("\"backend\":\"local\"") != std::string::npos);
  CHECK(bom.output.find("\"host\":\"127.0.0.1\"") != std::string::npos);
  CHECK(bom.output.find("\xEF\xBB\xBF") == std::string::npos);
  // Text right after the slot count: DeepSpeed's runner reads the leading digits, and so does
  // ds-launch, saying where and what it read.
  writeBytes(dir + "/trailing", "127.0.0.1 slots=3abc\n");
  const Outcome trailing = run(dir, bin + "/ds-launch -H trailing --dry-run -- /bin/true");
  INFO(trailing.output);
  CHECK(trailing.status == 0);
  CHECK(trailing.output.find("trailing:1: slots=3abc: read as slots=3, as DeepSpeed's runner "
                             "reads it (the leading digits; \"abc\" is ignored); write "
                             "slots=3") != std::string::npos);
  CHECK(trailing.output.find("world size 3 on 1 node(s)") != std::string::npos);
}
