// I/O faults during training: an offload read that fails with EIO (injected through
// DS_TEST_IO_FAULT) and a checkpoint directory on a small tmpfs that fills up. Either way the job
// stops with an error naming the file, the offset and the errno, the last complete checkpoint
// still loads and verifies, and no half-written one is left. The tmpfs part needs root (mount);
// it is skipped where mount is refused.
#include <sys/mount.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <regex>

#include "runtime/checkpoint/checkpoint_files.h"
#include "runtime/checkpoint/manifest.h"
#include "test/byte_corpus.h"
#include "test/launch_harness.h"
#include "test/run_command.h"
#include "test/scratch_dir.h"
#include "test/skip.h"

using namespace ds::test;
namespace fs = std::filesystem;

namespace {

// Sub-groups of at most 20000 elements through 2 slots: about a dozen groups, each read back from
// the swap file in every step (and every save, which brings the state in).
std::string yaml(const std::string& extra) {
  return R"(num-layers: 2
hidden-size: 128
num-attention-heads: 4
seq-length: 16
max-position-embeddings: 16
pos-emb: learned
data-path: data/corpus
tokenizer-type: ByteTokenizer
split: "90,10,0"
train-iters: 6
lr: 0.001
batch-size: 1
log-interval: 1
eval-interval: 1000
eval-iters: 1
save: ckpt
save-interval: 1
zero_optimization:
  stage: 1
  sub_group_size: 20000
  offload_optimizer:
    device: nvme
    nvme_path: swap
    buffer_count: 2
)" + extra;
}

std::string launch(const std::string& dir, const std::string& config, const std::string& env) {
  // Port 0: the coordinator takes a free port, so no other process's socket can make it fail.
  return "cd " + dir + " && " + env + " " + DS_BIN_DIR +
         "/ds-launch --hostfile hostfile --master_port 0 --log_dir logs-" + config +
         " train --config " + config + ".yml";
}

void prepare(const std::string& dir) {
  writeByteCorpus(dir + "/data/corpus", 20, [](int) { return 2; });
  fs::create_directories(dir + "/swap");
  writeFile(dir + "/hostfile", "127.0.0.1 slots=1\n");
}

// The checkpoint `latest` names: its manifest verifies and every file matches its CRC32C; no
// staging directory of a save that did not finish is left. Returns the tag.
std::string checkLastCheckpointIntact(const std::string& ckpt) {
  const std::string tag = ds::runtime::readLatestTag(ckpt);
  const auto manifest = ds::runtime::readManifest(ckpt + "/" + tag + "/manifest.json");
  REQUIRE_FALSE(manifest.files.empty());
  for (const auto& f : manifest.files)
    CHECK_NOTHROW(
        ds::runtime::verifyCheckpointFile(ckpt + "/" + tag + "/" + f.name, f.bytes, f.checksum));
  for (const auto& entry : fs::directory_iterator(ckpt))
    CHECK(entry.path().filename().string().rfind(".tmp", 0) != 0);
  return tag;
}

// The job resumes from what is left and trains to its end: the checkpoint loads. It saves
// elsewhere: the full disk stays full.
void checkResumes(const std::string& dir, const std::string& config) {
  writeFile(dir + "/" + config + "-resume.yml",
            std::regex_replace(yaml("load: ckpt\n"), std::regex("save: ckpt"), "save: resumed"));
  const CommandOutcome resumed = runCommand(launch(dir, config + "-resume", ""));
  INFO(resumed.output);
  CHECK(resumed.status == 0);
  CHECK(resumed.output.find("iteration 6/6") != std::string::npos);
}

struct Tmpfs {
  std::string dir;
  bool mounted = false;
  Tmpfs(std::string at, const std::string& size) : dir(std::move(at)) {
    fs::create_directories(dir);
    mounted = ::mount("tmpfs", dir.c_str(), "tmpfs", 0, ("size=" + size).c_str()) == 0;
  }
  ~Tmpfs() {
    if (mounted) ::umount2(dir.c_str(), MNT_DETACH);
  }
};

}  // namespace

TEST_CASE(
    "an I/O error on the optimizer swap file during a step stops the job by file, offset "
    "and errno, and the last checkpoint stays intact",
    "[faults][launch]") {
  const std::string dir = makeScratchDir("io-fault");
  prepare(dir);
  writeFile(dir + "/eio.yml", yaml(""));
  // The 30th swap read: after the first step and its save, before the last step.
  const CommandOutcome failed = runCommand(launch(dir, "eio", "DS_TEST_IO_FAULT=read:30:EIO"));
  INFO(failed.output);
  CHECK(failed.status != 0);
  CHECK(failed.status < 128);  // an error exit, not a crash
  CHECK(std::regex_search(
      failed.output,
      std::regex("offload_optimizer swap file ([^ ]*/)?swap/\\.ds-optimizer-swap-[0-9]+-rank0 "
                 "\\(unlinked\\) \\(offset [0-9]+, [0-9]+ bytes\\): read failed: Input/output "
                 "error \\(EIO, errno 5\\)")));
  CHECK(failed.output.find("iteration 6/6") == std::string::npos);
  const std::string tag = checkLastCheckpointIntact(dir + "/ckpt");
  CHECK(tag != "global_step6");
  checkResumes(dir, "eio");

  // A malformed hook is refused, not ignored.
  const CommandOutcome typo = runCommand(launch(dir, "eio", "DS_TEST_IO_FAULT=reed:4"));
  CHECK(typo.status != 0);
  CHECK(typo.output.find("DS_TEST_IO_FAULT=reed:4: expected KIND:N") != std::string::npos);
}

TEST_CASE(
    "a swap file whose data changed under the job stops it by file and offset (its checksum), "
    "not by a NaN gradient norm, and the last checkpoint stays intact",
    "[faults][launch]") {
  const std::string dir = makeScratchDir("io-corrupt");
  prepare(dir);
  writeFile(dir + "/corrupt.yml", yaml(""));
  // The 30th read returns other data than was written (or the 40th write puts other data there).
  for (const char* fault : {"read:30:corrupt", "write:40:corrupt"}) {
    INFO(fault);
    fs::remove_all(dir + "/ckpt");
    const CommandOutcome failed =
        runCommand(launch(dir, "corrupt", std::string("DS_TEST_IO_FAULT=") + fault));
    INFO(failed.output);
    CHECK(failed.status != 0);
    CHECK(failed.status < 128);
    CHECK(std::regex_search(
        failed.output,
        std::regex("offload_optimizer swap file ([^ ]*/)?swap/\\.ds-optimizer-swap-[0-9]+-rank0 "
                   "\\(unlinked\\): the [0-9]+ bytes at offset [0-9]+ read back with checksum "
                   "crc32c:[0-9a-f]{8}, written with crc32c:[0-9a-f]{8}: the file was changed under "
                   "the job or the device returned other data")));
    CHECK(failed.output.find("nan") == std::string::npos);
    CHECK(failed.output.find("iteration 6/6") == std::string::npos);
    checkLastCheckpointIntact(dir + "/ckpt");
  }
  checkResumes(dir, "corrupt");
}

TEST_CASE(
    "a full checkpoint disk (small tmpfs) stops the job by file, offset and ENOSPC, and "
    "the previous checkpoint stays intact",
    "[faults][launch]") {
  const std::string dir = makeScratchDir("full-disk");
  prepare(dir);
  // One checkpoint's size, from a run that saves once into an ordinary directory.
  writeFile(dir + "/probe.yml",
            std::regex_replace(yaml(""), std::regex("train-iters: 6"), "train-iters: 1"));
  const CommandOutcome probe = runCommand(launch(dir, "probe", ""));
  INFO(probe.output);
  REQUIRE(probe.status == 0);
  uint64_t bytes = 0;
  for (const auto& f : fs::recursive_directory_iterator(dir + "/ckpt"))
    if (f.is_regular_file()) bytes += f.file_size();
  fs::remove_all(dir + "/ckpt");
  // Room for one checkpoint and a half: the second save runs out of space.
  Tmpfs tmpfs(dir + "/ckpt", std::to_string(bytes * 3 / 2 + 65536));
  if (skipUnless(tmpfs.mounted, "cannot mount a tmpfs here (needs root)")) return;
  // A swap directory on a tmpfs too small for the state: refused at the start by name.
  Tmpfs tinySwap(dir + "/tiny-swap", "64k");
  writeFile(dir + "/tiny.yml",
            std::regex_replace(yaml(""), std::regex("nvme_path: swap"), "nvme_path: tiny-swap"));
  const CommandOutcome tiny = runCommand(launch(dir, "tiny", ""));
  CHECK(tiny.status != 0);
  CHECK(tiny.output.find("offload_optimizer.nvme_path tiny-swap: the offloaded state needs") !=
        std::string::npos);

  writeFile(dir + "/full.yml", yaml(""));
  const CommandOutcome failed = runCommand(launch(dir, "full", ""));
  INFO(failed.output);
  CHECK(failed.status != 0);
  CHECK(failed.status < 128);
  CHECK(std::regex_search(
      failed.output, std::regex("ckpt/\\.tmp-global_step[0-9]+/[^ :]+: write failed at offset "
                                "[0-9]+: No space left on device \\(ENOSPC, errno 28\\)")));
  checkLastCheckpointIntact(dir + "/ckpt");
  checkResumes(dir, "full");
}
