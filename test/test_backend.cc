// Backend command shapes (DEEPSPEED-SEMANTICS.md section 9), world_info encoding (section 6) and
// the exported environment (section 8).
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "contract/world_info.h"
#include "launcher/backend.h"
#include "test/scratch_dir.h"

using namespace ds::launcher;

namespace {

BackendRequest requestFor(Backend backend, const Resources& nodes) {
  BackendRequest request;
  request.backend = backend;
  request.plan = makeLaunchPlan(nodes);
  request.pool = nodes;
  request.hostfilePath = "/job/hostfile";
  request.coordinatorAddress = "10.0.0.1:29500";
  request.workerPath = "/opt/ds/bin/ds-worker";
  request.workDir = "/home/me/run";
  request.scratchDir = "/tmp/logs";
  request.exports = {{"PYTHONPATH", "/home/me/run"}, {"NCCL_DEBUG", "INFO"}};
  return request;
}

bool contains(const std::vector<std::string>& argv, const std::vector<std::string>& run) {
  return std::search(argv.begin(), argv.end(), run.begin(), run.end()) != argv.end();
}

const Resources kTwoNodes = {{"worker-0", {0, 1}}, {"worker-1", {0, 1}}};

}  // namespace

TEST_CASE("world_info: byte-for-byte DeepSpeed's encoding, and back") {
  REQUIRE(ds::encodeWorldInfo({{"localhost", {0, 1}}}) == "eyJsb2NhbGhvc3QiOiBbMCwgMV19");
  const ds::WorldInfo world = {{"worker-1", {0, 2}}, {"worker-0", {3}}, {"h\xc3\xa9", {}}};
  REQUIRE(ds::decodeWorldInfo(ds::encodeWorldInfo(world)) == world);  // order kept
  REQUIRE_THROWS_WITH(ds::decodeWorldInfo("e30*"), Catch::Contains("not URL-safe base64"));
  REQUIRE_THROWS_WITH(ds::decodeWorldInfo("WzFd"), Catch::Contains("not a base64 JSON object"));
  // {"h": [-1]}, {"h": [4294967296]}: not slot numbers.
  REQUIRE_THROWS_WITH(ds::decodeWorldInfo("eyJoIjogWy0xXX0="),
                      Catch::Contains("not a slot number"));
  REQUIRE_THROWS_WITH(ds::decodeWorldInfo("eyJoIjogWzQyOTQ5NjcyOTZdfQ=="),
                      Catch::Contains("not a slot number"));
}

TEST_CASE("backend: names, and unknown ones listed") {
  REQUIRE(parseBackend("PDSH") == Backend::Pdsh);
  REQUIRE(parseBackend("openmpi") == Backend::OpenMpi);
  REQUIRE_THROWS_WITH(parseBackend("torchrun"), Catch::Contains("use one of local, ssh, pdsh"));
}

TEST_CASE("backend: local starts one worker per rank with host and slot") {
  const auto commands = buildLaunchCommands(requestFor(Backend::Local, {{"127.0.0.1", {1, 3}}}));
  REQUIRE(commands.size() == 2);
  REQUIRE(commands[1].ranks == std::vector<int>{1});
  REQUIRE(commands[1].argv == std::vector<std::string>{"/opt/ds/bin/ds-worker", "--coordinator",
                                                       "10.0.0.1:29500", "--host", "127.0.0.1",
                                                       "--slot", "3"});
}

TEST_CASE("backend: ssh runs one node agent per node, token and exports by SendEnv only") {
  auto request = requestFor(Backend::Ssh, kTwoNodes);
  request.sshPort = 2222;
  request.exports.push_back({"WEIRD", "it's $HOME"});
  const auto commands = buildLaunchCommands(request);
  REQUIRE(commands.size() == 2);
  const auto& argv = commands[1].argv;
  REQUIRE(contains(argv, {"ssh", "-p", "2222", "-o", "SendEnv=LC_DS_*", "--", "worker-1"}));
  const std::string& remote = argv.back();
  REQUIRE_THAT(remote, Catch::StartsWith("cd /home/me/run; exec /opt/ds/bin/ds-worker "
                                         "--coordinator 10.0.0.1:29500 --world_info "));
  // No exported value on any command line: they ride in forwarded LC_DS_EXPORT_<n> variables.
  for (const auto& arg : argv) REQUIRE(arg.find("it's") == std::string::npos);
  REQUIRE(commands[1].env == EnvList{{"LC_DS_EXPORT_0", "PYTHONPATH=/home/me/run"},
                                     {"LC_DS_EXPORT_1", "NCCL_DEBUG=INFO"},
                                     {"LC_DS_EXPORT_2", "WEIRD=it's $HOME"}});
  REQUIRE_THAT(remote, Catch::EndsWith("--node_rank 1"));
  REQUIRE(commands[1].ranks == std::vector<int>{2, 3});
}

TEST_CASE("backend: pdsh is one command over the selected hosts with %n as node rank") {
  auto request = requestFor(Backend::Pdsh, kTwoNodes);
  request.launcherArgs = "-R ssh";
  const auto commands = buildLaunchCommands(request);
  REQUIRE(commands.size() == 1);
  const auto& argv = commands[0].argv;
  REQUIRE(
      contains(argv, {"pdsh", "-S", "-N", "-f", "1024", "-w", "worker-0,worker-1", "-R", "ssh"}));
  REQUIRE_THAT(argv.back(), Catch::EndsWith("--node_rank %n"));
  REQUIRE(commands[0].env == EnvList{{"PDSH_RCMD_TYPE", "ssh"},
                                     {"PDSH_SSH_ARGS_APPEND", "-o SendEnv=LC_DS_*"},
                                     {"LC_DS_EXPORT_0", "PYTHONPATH=/home/me/run"},
                                     {"LC_DS_EXPORT_1", "NCCL_DEBUG=INFO"}});
  REQUIRE_THAT(argv.back(), Catch::StartsWith("cd /home/me/run; exec "));
  REQUIRE(commands[0].ranks.size() == 4);
}

TEST_CASE("backend: openmpi matches DeepSpeed's mpirun shape, token and exports by name only") {
  auto request = requestFor(Backend::OpenMpi, kTwoNodes);
  request.exports.push_back({"UCX_TLS", "rc"});  // replaces DeepSpeed's UCX_TLS=tcp in place
  auto command = buildLaunchCommands(request)[0];
  auto argv = command.argv;
  REQUIRE(contains(argv, {"mpirun", "-n", "4", "-hostfile", "/job/hostfile", "--mca", "btl",
                          "^openib", "--mca", "btl_tcp_if_include", "eth0"}));
  REQUIRE(contains(argv, {"-x", "DS_JOB_TOKEN", "-x", "UCX_TLS", "-x", "PYTHONPATH", "-x",
                          "NCCL_DEBUG", "/opt/ds/bin/ds-worker"}));
  REQUIRE(command.env ==
          EnvList{{"UCX_TLS", "rc"}, {"PYTHONPATH", "/home/me/run"}, {"NCCL_DEBUG", "INFO"}});
  REQUIRE(contains(
      argv, {"/opt/ds/bin/ds-worker", "--coordinator", "10.0.0.1:29500", "--rank_from_env"}));
  request.launcherArgs = "--mca btl_tcp_if_include lo --allow-run-as-root";
  argv = buildLaunchCommands(request)[0].argv;
  REQUIRE_FALSE(contains(argv, {"btl_tcp_if_include", "eth0"}));
  REQUIRE(contains(argv, {"--mca", "btl_tcp_if_include", "lo", "--allow-run-as-root"}));
  REQUIRE_THROWS_WITH(validateBackend(Backend::OpenMpi, "worker-0", "", -1, -1),
                      Catch::Contains("does not support worker include/exclusion"));
  REQUIRE_THROWS_WITH(validateBackend(Backend::OpenMpi, "", "", 0, -1),
                      Catch::Contains("does not support limiting num nodes/gpus"));
  REQUIRE_NOTHROW(validateBackend(Backend::Slurm, "worker-0", "", -1, -1));
}

TEST_CASE("backend: MPICH, Intel MPI and MVAPICH need equal slots per node") {
  auto request = requestFor(Backend::Mpich, {{"a", {0, 1}}, {"b", {0}}});
  REQUIRE_THROWS_WITH(buildLaunchCommands(request),
                      Catch::Contains("MPICH requires same number of devices per node"));
  request = requestFor(Backend::Mpich, kTwoNodes);
  auto argv = buildLaunchCommands(request)[0].argv;
  REQUIRE(contains(argv, {"mpirun", "-n", "4", "-ppn", "2"}));
  REQUIRE(contains(
      argv, {"-genvlist", "PYTHONPATH,NCCL_DEBUG,DS_JOB_TOKEN", "-hosts", "worker-0,worker-1"}));
  request.backend = Backend::Mvapich;
  const auto command = buildLaunchCommands(request)[0];
  REQUIRE(contains(command.argv, {"mpirun", "-np", "4", "-ppn", "2", "--hostfile",
                                  "/tmp/logs/mvapich_hostfile"}));
  REQUIRE(contains(command.argv, {"-genvlist",
                                  "MV2_SMP_USE_CMA,MV2_DEBUG_SHOW_BACKTRACE,MV2_SUPPORT_DL,"
                                  "MV2_ENABLE_AFFINITY,MV2_INTER_ALLGATHER_TUNING,MV2_CUDA_USE_"
                                  "NAIVE,PYTHONPATH,NCCL_DEBUG,DS_JOB_TOKEN"}));
  REQUIRE(command.env.front() == std::pair<std::string, std::string>{"MV2_SMP_USE_CMA", "0"});
}

TEST_CASE("backend: slurm places exactly the planned ranks through SLURM_HOSTFILE") {
  const auto request = requestFor(Backend::Slurm, {{"worker-0", {0, 1, 2}}, {"worker-1", {0}}});
  const auto command = buildLaunchCommands(request)[0];
  REQUIRE(contains(command.argv, {"srun", "-n", "4", "-m", "arbitrary", "--export=ALL",
                                  "/opt/ds/bin/ds-worker"}));
  REQUIRE(command.env == EnvList{{"SLURM_HOSTFILE", "/tmp/logs/slurm_hostfile"},
                                 {"PYTHONPATH", "/home/me/run"},
                                 {"NCCL_DEBUG", "INFO"}});
  REQUIRE(slurmHostfileText(request.plan) == "worker-0\nworker-0\nworker-0\nworker-1\n");
}

TEST_CASE("launcher_args are split like shlex.split") {
  REQUIRE(splitShellWords("-mca btl_tcp_if_include eth1") ==
          std::vector<std::string>{"-mca", "btl_tcp_if_include", "eth1"});
  REQUIRE(splitShellWords(R"(--x 'a b' "c \"d\"" e\ f)") ==
          std::vector<std::string>{"--x", "a b", "c \"d\"", "e f"});
  REQUIRE_THROWS_WITH(splitShellWords("'open"), Catch::Contains("no closing quotation"));
}

TEST_CASE("exports: prefixes, PYTHONPATH first, .deepspeed_env files override in place") {
  const std::filesystem::path dir = ds::test::makeScratchDir("env");
  std::filesystem::create_directories(dir / "home");
  std::filesystem::create_directories(dir / "work");
  std::ofstream(dir / "home" / ".deepspeed_env") << "NCCL_DEBUG=WARN\nFROM_HOME=1\n";
  std::ofstream(dir / "work" / ".deepspeed_env") << "# a comment\n\nFROM_HOME=2\nEQ=a=b\n";
  const EnvList exports =
      collectExports({"PATH=/bin", "NCCL_DEBUG=INFO", "PYTHONPATH=/lib", "MASTER_HOSTNAME=x",
                      "NCCLX=1", "HOME=/h"},
                     (dir / "work").string(), (dir / "home").string(), ".deepspeed_env");
  REQUIRE(exports == EnvList{{"NCCL_DEBUG", "WARN"},
                             {"PYTHONPATH", (dir / "work").string() + ":/lib"},
                             {"MASTER_HOSTNAME", "x"},
                             {"NCCLX", "1"},
                             {"FROM_HOME", "2"},
                             {"EQ", "a=b"}});
  std::ofstream(dir / "work" / ".deepspeed_env") << "JUSTAWORD\n";
  REQUIRE_THROWS_WITH(collectExports({}, (dir / "work").string(), "", ".deepspeed_env"),
                      Catch::Contains(".deepspeed_env:1: 'JUSTAWORD' is not KEY=VALUE"));
}

TEST_CASE("shell quoting keeps safe values and single-quotes the rest") {
  REQUIRE(shellQuote("/a/b-c_d.e:f,g@h%i+j=k") == "/a/b-c_d.e:f,g@h%i+j=k");
  REQUIRE(shellQuote("") == "''");
  REQUIRE(shellQuote("a b") == "'a b'");
  REQUIRE(shellQuote("it's") == "'it'\\''s'");
}

TEST_CASE("exports: a .deepspeed_env key that is not a plain variable name is refused") {
  const std::filesystem::path dir = ds::test::makeScratchDir("envkey");
  for (const std::string key : {"FOO;touch${IFS}/tmp/x;BAR", "1ABC", "A-B", "A B", "$(id)"}) {
    std::ofstream(dir / ".deepspeed_env") << "OK_1=fine\n" << key << "=v\n";
    INFO("key: " << key);
    CHECK_THROWS_WITH(collectExports({}, dir.string(), "", ".deepspeed_env"),
                      Catch::Contains(".deepspeed_env:2: '" + key + "' is not a variable name"));
  }
  std::ofstream(dir / ".deepspeed_env") << "_Under_9=x\n";
  CHECK(collectExports({}, dir.string(), "", ".deepspeed_env").back() ==
        std::pair<std::string, std::string>{"_Under_9", "x"});
}

TEST_CASE("exports: a .deepspeed_env that is a FIFO, a device or too large is refused unread") {
  const std::filesystem::path dir = ds::test::makeScratchDir("envfile");
  const std::string path = (dir / ".deepspeed_env").string();
  REQUIRE(mkfifo(path.c_str(), 0600) == 0);  // reading it would block for ever
  CHECK_THROWS_WITH(collectExports({}, dir.string(), "", ".deepspeed_env"),
                    Catch::Contains("not a regular file"));
  std::filesystem::remove(path);
  std::filesystem::create_symlink("/dev/zero", path);  // reading it would never end
  CHECK_THROWS_WITH(collectExports({}, dir.string(), "", ".deepspeed_env"),
                    Catch::Contains("not a regular file"));
  std::filesystem::remove(path);
  std::ofstream(path) << std::string(2 << 20, '#');
  CHECK_THROWS_WITH(collectExports({}, dir.string(), "", ".deepspeed_env"),
                    Catch::Contains("larger than 1 MiB"));
}

TEST_CASE("backend: netns runs each node agent in its host's namespace, environment inherited") {
  auto request = requestFor(Backend::Netns, {{"10.7.0.1", {0}}, {"10.7.0.2", {0, 1}}});
  request.netnsMap = "10.7.0.2=dsnet-9-0-n1,10.7.0.1=dsnet-9-0-n0";
  const auto commands = buildLaunchCommands(request);
  REQUIRE(commands.size() == 2);
  REQUIRE(commands[1].host == "10.7.0.2");
  REQUIRE(commands[1].ranks == std::vector<int>{1, 2});
  const auto& argv = commands[1].argv;
  REQUIRE(contains(argv, {"ip", "netns", "exec", "dsnet-9-0-n1", "/opt/ds/bin/ds-worker",
                          "--coordinator", "10.0.0.1:29500", "--world_info"}));
  REQUIRE(argv.back() == "1");  // --node_rank 1
  REQUIRE(commands[0].argv[3] == "dsnet-9-0-n0");
  REQUIRE(commands[1].env == request.exports);
  REQUIRE(parseBackend("NETNS") == Backend::Netns);
  REQUIRE(backendProgram(Backend::Netns) == "ip");

  request.netnsMap = "10.7.0.1=dsnet-9-0-n0";
  REQUIRE_THROWS_WITH(buildLaunchCommands(request),
                      Catch::Contains("host '10.7.0.2' has no namespace in DS_NETNS_MAP"));
  for (const char* bad : {"10.7.0.1", "10.7.0.1=", "=ns", "10.7.0.1=../etc", "10.7.0.1=.."}) {
    request.netnsMap = bad;
    REQUIRE_THROWS_WITH(buildLaunchCommands(request), Catch::Contains("expected HOST=NAMESPACE"));
  }
}
