// Malformed command lines through the real binaries: each ends with a message and a non-zero
// status, never a crash signal (std::terminate would show as 134).
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

#include "test/run_command.h"
#include "test/scratch_dir.h"

namespace {

using Outcome = ds::test::CommandOutcome;
using ds::test::runCommand;

}  // namespace

TEST_CASE("robustness: benches refuse malformed numbers without crashing") {
  const std::string bin = DS_BIN_DIR;
  for (const std::string& command :
       {bin + "/bench_launch --ranks abc", bin + "/bench_comm --ranks x",
        bin + "/bench_comm --bytes 99999999999999999999999", bin + "/bench_cpu_adam --params -",
        bin + "/bench_zero --steps 0", bin + "/bench_launch --repeats 1x",
        bin + "/bench_gpt --threads 0", bin + "/bench_gpt --seq", bin + "/bench_kernels --reps 0",
        bin + "/bench_kernels --seq 4096",
        bin + "/bench_gpt_memory --hidden 1e9", bin + "/bench_elastic --fast",
        bin + "/bench_aio --depth 0", bin + "/bench_offload --steps 0",
        bin + "/bench_control_plane --nodes 0", bin + "/bench_infinity --steps 1",
        bin + "/bench_infinity --dir /nonexistent-swap-dir"}) {
    INFO(command);
    const Outcome outcome = runCommand(command);
    INFO(outcome.output);
    CHECK(outcome.status == 2);
    CHECK(outcome.output.find("error: ") != std::string::npos);
    // The message names the flag it refuses.
    const std::string flag = command.substr(command.find(" --") + 1, command.find(' ', command.find(" --") + 1) - command.find(" --") - 1);
    CHECK(outcome.output.find(flag) != std::string::npos);
  }
}

TEST_CASE("robustness: ds-launch names why the coordinator cannot listen") {
  const std::string bin = DS_BIN_DIR;
  const std::filesystem::path dir = ds::test::makeScratchDir("listen");
  std::ofstream(dir / "hostfile") << "127.0.0.1 slots=1\n";
  std::ofstream(dir / "bad.pem") << "not a certificate\n";
  const std::string launch = "cd " + dir.string() + " && " + bin + "/ds-launch -H hostfile ";

  SECTION("a port in use") {
    const int holder = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(bind(holder, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0);
    REQUIRE(listen(holder, 1) == 0);
    socklen_t length = sizeof(address);
    getsockname(holder, reinterpret_cast<sockaddr*>(&address), &length);
    const int port = ntohs(address.sin_port);
    const Outcome outcome =
        runCommand(launch + "--master_port " + std::to_string(port) + " -- /bin/true");
    close(holder);
    CHECK(outcome.status == 2);
    CHECK_THAT(outcome.output, Catch::Contains("port " + std::to_string(port) + " is in use"));
  }
  SECTION("a TLS file that is no certificate") {
    const Outcome outcome = runCommand(
        launch +
        "--master_port 0 --tls-cert bad.pem --tls-key bad.pem --tls-ca bad.pem -- /bin/true");
    CHECK(outcome.status == 2);
    CHECK_THAT(outcome.output, Catch::Contains("TLS certificate or key"));
    CHECK_THAT(outcome.output, !Catch::Contains("port"));
  }
  SECTION("a port out of range") {
    const Outcome outcome = runCommand(launch + "--master_port 70000 -- /bin/true");
    CHECK(outcome.status != 0);
    CHECK(outcome.status < 128);
    CHECK_THAT(outcome.output, Catch::Contains("70000"));
  }
}

TEST_CASE("robustness: --dry-run --json stays valid JSON with exported values that are not UTF-8") {
  const std::string bin = DS_BIN_DIR;
  const std::filesystem::path dir = ds::test::makeScratchDir("dryjson");
  std::ofstream(dir / "hostfile") << "worker-0 slots=1\nworker-1 slots=1\n";
  const Outcome outcome =
      runCommand("cd " + dir.string() + " && NCCL_DS_BAD='\xff\xfe' " + bin +
                 "/ds-launch -H hostfile --launcher ssh --dry-run --json -- prog");
  REQUIRE(outcome.status == 0);
  CHECK(outcome.output.find("\"world_size\":2") != std::string::npos);
  CHECK(outcome.output.find("\xef\xbf\xbd") != std::string::npos);  // U+FFFD in place of the bytes
}

TEST_CASE("robustness: ds-launch refuses unknown options and bad flag values with exit 2") {
  const std::string bin = DS_BIN_DIR;
  for (const std::string& args : std::vector<std::string>{
           "--bogus x", "--master_port 70000 -- /bin/true", "--num_gpus many -- /bin/true",
           "--heartbeat_interval 5 --heartbeat_timeout 1 -- /bin/true", "train --steps 3",
           "ds-comm-bench --op alltoall", "--json -- /bin/true"}) {
    INFO(args);
    const Outcome outcome = runCommand(bin + "/ds-launch -H /nonexistent " + args);
    CHECK(outcome.status == 2);
    CHECK(outcome.output.find("rank ") == std::string::npos);  // nothing was started
  }
}

TEST_CASE(
    "robustness: train on a device: what runs only on the CPU is refused before any rank starts") {
  const std::string launch = std::string(DS_BIN_DIR) + "/ds-launch --hostfile " + DS_SOURCE_DIR +
                             "/hostfiles/loopback --dry-run train --config " + DS_SOURCE_DIR;
  const std::string gpt = launch + "/configs/gpt_demo.yml";
  // The GPT trainer runs on cuda (whether a node has a GPU is each rank's to say).
  CHECK(runCommand("env -u DS_ACCELERATOR " + gpt + " --device cuda").status == 0);
  CHECK(runCommand("DS_ACCELERATOR=cuda " + gpt).status == 0);
  // The MLP trainer does not, named by what chose the device.
  const std::string mlp = launch + "/configs/ds_config.json";
  const Outcome flag = runCommand("env -u DS_ACCELERATOR " + mlp + " --device cuda");
  CHECK(flag.status == 2);
  CHECK_THAT(flag.output, Catch::Contains("train --device cuda: the MLP trainer (a DeepSpeed JSON "
                                          "config) runs on the CPU only"));
  const Outcome variable = runCommand("DS_ACCELERATOR=cuda " + mlp);
  CHECK(variable.status == 2);
  CHECK_THAT(variable.output, Catch::Contains("DS_ACCELERATOR=cuda: the MLP trainer"));
  // Nor does a GPT on a pipe x model grid.
  const Outcome grid =
      runCommand("env -u DS_ACCELERATOR " + launch + "/configs/gpt_demo_3d.yml --device cuda");
  CHECK(grid.status == 2);
  CHECK_THAT(grid.output, Catch::Contains("train --device cuda: pipe-parallel-size 2 runs on the "
                                          "CPU only so far; use device cpu"));
  const Outcome typo = runCommand("env -u DS_ACCELERATOR " + gpt + " --device gpu");
  CHECK(typo.status == 2);
  CHECK_THAT(typo.output, Catch::Contains("train --device: expected cpu or cuda, got \"gpu\""));
  const Outcome badVariable = runCommand("DS_ACCELERATOR=xpu " + gpt);
  CHECK(badVariable.status == 2);
  CHECK_THAT(badVariable.output, Catch::Contains("DS_ACCELERATOR: expected cpu or cuda"));
  // The flag wins over the variable, as an explicit choice does in DeepSpeed.
  CHECK(runCommand("DS_ACCELERATOR=cuda " + mlp + " --device cpu").status == 0);
  CHECK(runCommand("env -u DS_ACCELERATOR " + mlp + " --device cpu").status == 0);
}

TEST_CASE("robustness: train --steps that contradicts a NeoX YAML's train-iters is refused") {
  const std::string launch = std::string(DS_BIN_DIR) + "/ds-launch --hostfile " + DS_SOURCE_DIR +
                             "/hostfiles/loopback --dry-run train --config " + DS_SOURCE_DIR +
                             "/configs/gpt_demo.yml";
  const Outcome contradicting = runCommand(launch + " --steps 5");
  CHECK(contradicting.status == 2);
  CHECK(contradicting.output.find("train-iters (800) is the number of steps") != std::string::npos);
  CHECK(runCommand(launch + " --steps 800").status == 0);  // the same count is no contradiction
  CHECK(runCommand(launch).status == 0);
}
