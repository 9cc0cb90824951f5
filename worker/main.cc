// ds-worker: one per rank. Joins the coordinator, keeps its command stream and heartbeats going,
// runs the job (the built-in trainer or an external program), reports, exits. Started with
// --world_info/--node_rank it is a node agent that starts one worker per slot instead. With --relay
// it reaches the coordinator through its node's relay (worker/node_relay.h), hosting it if it is
// the first of the node to bind its socket; only then does it load gRPC.
// Exit status: 0 done, 1 job failed (or the program's own status), 2 bad usage, 3 join refused,
// 10 aborted by the coordinator, 11 coordinator gone.
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "common/error.h"
#include "common/guarded_main.h"
#include "contract/forwarded_env.h"
#include "runtime/comm/shm_segment.h"
#include "runtime/comm/store_barrier.h"
#include "common/files.h"
#include "worker/comm_bench_job.h"
#include "worker/coordinator_client.h"
#include "worker/coordinator_store.h"
#include "worker/external_program.h"
#include "worker/local_address.h"
#include "worker/node_agent.h"
#include "worker/grpc_entry.h"
#include "worker/node_relay.h"
#include "worker/relay_protocol.h"
#include "worker/output_tagger.h"
#include "worker/progress_board.h"
#include "worker/rank_environment.h"
#include "worker/train_job.h"
#include "worker/world_communicator.h"

namespace {

using namespace ds::worker;
using ds::CommandKind;
using ds::Progress;
using ds::RankReport;
using ds::RankState;
using ds::TlsFiles;

constexpr int kJobFailed = 1;
constexpr int kUsage = 2;
constexpr int kJoinRefused = 3;
constexpr int kAborted = 10;
constexpr int kCoordinatorGone = 11;
constexpr auto kProgramMasterWait = std::chrono::minutes(5);

std::atomic<int> gProgramPid{0};
// The node relay this worker hosts for its node, if it does: kept up until the node's other ranks
// are done, and given a moment to pass on a last command before an exit.
std::unique_ptr<RelayHost> gRelay;

// Read by the heartbeat thread at send time, so the training loop never touches /proc.
int64_t residentBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * 4096;
}

// Leaves at once, from any thread: the job may be blocked inside a collective that will never
// complete, so there is nothing to unwind cleanly. A running program's process group gets SIGTERM
// and a second to go, then SIGKILL; PDEATHSIG ends the program itself otherwise.
[[noreturn]] void leaveNow(int status, const std::string& why) {
  if (const int program = gProgramPid.load(); program > 0) {
    kill(-program, SIGTERM);  // its process group: the program's own children too
    for (int i = 0; i < 100 && gProgramPid.load() != 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    kill(-program, SIGKILL);  // whatever of the group is left (children that ignore SIGTERM)
  }
  // A group segment created by this rank is still named if its peers never attached.
  ds::runtime::unlinkOwnedShmSegments();
  // The abort this rank got is on its way to the node's other ranks too.
  if (gRelay) gRelay->flush(std::chrono::seconds(1));
  finishTaggedOutput("ds-worker: " + why);
  _exit(status);
}

// SIGTERM, SIGINT or SIGHUP to a rank's worker (ds-launch's teardown, or its parent-death signal
// when ds-launch itself was killed): the program's whole process group goes first, so its own
// children never outlive the job; then the worker dies of the signal as it would have.
// Async-signal-safe only.
void onTerminationSignal(int signal) {
  if (const int program = gProgramPid.load(); program > 0) kill(-program, SIGKILL);
  ds::runtime::unlinkOwnedShmSegments();
  struct sigaction defaults {};
  defaults.sa_handler = SIG_DFL;
  sigaction(signal, &defaults, nullptr);
  raise(signal);
}

void installTerminationHandler() {
  struct sigaction action {};
  action.sa_handler = onTerminationSignal;
  for (int signal : {SIGTERM, SIGINT, SIGHUP}) sigaction(signal, &action, nullptr);
}

// Reads a variable and erases it from the environment, the initial block included (it may hold a
// secret that /proc/PID/environ would show).
std::string takeVariable(const char* name) {
  std::string value;
  if (char* text = std::getenv(name)) {
    value = text;
    std::memset(text, 'x', std::strlen(text));
  }
  unsetenv(name);
  return value;
}

// --tls-auto's certificate, key and CA, when ds-launch sent them (explicit files win). `keep`:
// put them back for the processes this one starts (the node agent's workers).
void takeTlsFromEnvironment(TlsFiles& tls, bool keep = false) {
  const std::string cert = takeVariable(ds::kTlsCertPemVariable);
  const std::string key = takeVariable(ds::kTlsKeyPemVariable);
  const std::string ca = takeVariable(ds::kTlsCaPemVariable);
  if (keep)
    for (const auto& [name, value] : {std::pair{ds::kTlsCertPemVariable, &cert},
                                      {ds::kTlsKeyPemVariable, &key},
                                      {ds::kTlsCaPemVariable, &ca}})
      if (!value->empty()) setenv(name, value->c_str(), 1);
  if (!tls.certPem.empty() || cert.empty()) return;
  if (key.empty() || ca.empty())
    throw ds::Error(std::string(ds::kTlsCertPemVariable) + " is set without " +
                    ds::kTlsKeyPemVariable + " and " + ds::kTlsCaPemVariable);
  tls = {cert, key, ca};
}

// The job token: DS_JOB_TOKEN (local, MPI, Slurm), LC_DS_JOB_TOKEN (through ssh's SendEnv), or
// DS_JOB_TOKEN_FILE, a file only its owner can read. Removed from the environment once read so no
// program started later inherits it.
std::string takeJobToken() {
  std::string token;
  for (const char* name : {ds::kJobTokenVariable, ds::kSshTokenVariable})
    if (const char* value = std::getenv(name); value != nullptr && *value != '\0' && token.empty())
      token = value;
  if (const char* file = std::getenv(ds::kJobTokenFileVariable); token.empty() && file != nullptr) {
    struct stat info {};
    if (stat(file, &info) != 0)
      throw ds::Error(std::string("DS_JOB_TOKEN_FILE ") + file + ": missing");
    if ((info.st_mode & 077) != 0)
      throw ds::Error(std::string("DS_JOB_TOKEN_FILE ") + file +
                      ": readable by others; chmod 600 it");
    token = ds::readWholeFile(file, "job token file (DS_JOB_TOKEN_FILE)", 1 << 20);
    while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
  }
  // unsetenv only drops the pointer: the text stays in the process's initial environment block,
  // which /proc/PID/environ shows to the user's other processes. Overwrite it in place first.
  for (const char* name : {ds::kJobTokenVariable, ds::kSshTokenVariable})
    if (char* value = std::getenv(name)) std::memset(value, 'x', std::strlen(value));
  for (const char* name : {ds::kJobTokenVariable, ds::kSshTokenVariable, ds::kJobTokenFileVariable})
    unsetenv(name);
  if (token.empty())
    throw ds::Error(
        "no job token: DS_JOB_TOKEN is not set (ds-launch sets it; with --no_ssh "
        "export the same DS_JOB_TOKEN on every node)");
  return token;
}

// Where the program's torch.distributed rendezvous lives: a free port on rank 0's host, chosen by
// rank 0 and shared through the coordinator (the coordinator itself holds --master_port).
std::pair<std::string, int> programMaster(const JoinResult& join, const std::string& address,
                                          CoordinatorClient& client) {
  if (join.rank == 0) {
    const int port = freePortOn(address);
    client.kvSet("program/master", address + ":" + std::to_string(port));
    return {address, port};
  }
  const std::string value = client.kvGet("program/master", kProgramMasterWait);
  const auto colon = value.rfind(':');
  return {value.substr(0, colon), std::stoi(value.substr(colon + 1))};
}

TlsFiles readTlsFiles(const std::string& cert, const std::string& key, const std::string& ca) {
  TlsFiles tls;
  if (!cert.empty()) tls.certPem = ds::readWholeFile(cert, "PEM certificate (--tls_cert)", 1 << 20);
  if (!key.empty()) tls.keyPem = ds::readWholeFile(key, "PEM key (--tls_key)", 1 << 20);
  if (!ca.empty()) tls.caPem = ds::readWholeFile(ca, "PEM CA (--tls_ca)", 1 << 20);
  return tls;
}

// ds-worker --join: one Offer, its answer on stdout (accepted) or stderr (refused: exit 2).
int offerNode(const std::string& address, std::string host, int slots, const std::string& tlsCert,
              const std::string& tlsKey, const std::string& tlsCa) {
  if (host.empty()) host = machineName();
  if (slots < 1) leaveNow(kUsage, "--join needs --slots N (the ranks this node can run)");
  try {
    CoordinatorClient client(address, takeJobToken(), readTlsFiles(tlsCert, tlsKey, tlsCa));
    const auto [accepted, message] = client.offer(host, slots);
    if (!accepted) leaveNow(kUsage, "the job did not take " + host + ": " + message);
    std::printf("ds-worker: %s\n", message.c_str());
    return 0;
  } catch (const ds::Error& e) {
    leaveNow(kUsage, std::string("--join: ") + e.what());
  }
}

// The worker's whole life; main() only adds the last-resort guard.
int run(int argc, char** argv) {
  // Before anything reads the environment: ssh and pdsh deliver the job's exports in carriers.
  ds::adoptForwardedExports();
  CLI::App app{"ds-worker: one rank of a ds-launch job (started by ds-launch)"};
  std::string coordinatorAddress, host, worldInfo, tlsCert, tlsKey, tlsCa, joinAddress, relay;
  int slot = -1, nodeRank = -1, offeredSlots = 0;
  bool rankFromEnv = false;
  int joinTimeoutSeconds = 60;
  int relayKeepaliveMs = 5000;
  app.add_option("--coordinator", coordinatorAddress, "coordinator host:port");
  app.add_option("--join", joinAddress,
                 "offer this node (--host NAME, --slots N) to the running elastic job whose "
                 "coordinator is at host:port; needs the job's DS_JOB_TOKEN");
  app.add_option("--slots", offeredSlots, "with --join: the ranks this node can run");
  app.add_option("--host", host, "this node's name in the launch plan; Gloo binds to it");
  app.add_option("--slot", slot, "slot id on this host");
  app.add_option("--world_info", worldInfo, "node agent: the job's nodes and slots (base64)");
  app.add_option("--node_rank", nodeRank, "node agent: this node's index in --world_info");
  app.add_flag("--rank_from_env", rankFromEnv,
               "take the rank from OMPI_COMM_WORLD_RANK/PMIX_RANK/PMI_RANK/SLURM_PROCID");
  app.add_option("--join_timeout", joinTimeoutSeconds, "seconds to wait for the coordinator");
  app.add_option("--relay", relay,
                 "reach the coordinator through this node's relay (ds-launch's per-launch id): "
                 "the first worker of the node (or its node agent) hosts it");
  app.add_option("--relay_keepalive_ms", relayKeepaliveMs,
                 "the relay pings the coordinator this often and gives up after as long again")
      ->check(CLI::Range(50, 600000));
  app.add_option("--tls_cert", tlsCert, "PEM certificate for mutual TLS");
  app.add_option("--tls_key", tlsKey, "PEM private key for mutual TLS");
  app.add_option("--tls_ca", tlsCa, "PEM CA certificate that signed the coordinator's");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kUsage;
  }

  if (!joinAddress.empty()) return offerNode(joinAddress, host, offeredSlots, tlsCert, tlsKey, tlsCa);
  if (coordinatorAddress.empty()) leaveNow(kUsage, "--coordinator HOST:PORT is required");
  const int modes =
      (!host.empty() || slot >= 0) + (!worldInfo.empty() || nodeRank >= 0) + rankFromEnv;
  if (modes != 1 || (!host.empty() && slot < 0) || (host.empty() && slot >= 0) ||
      (!worldInfo.empty() && nodeRank < 0) || (worldInfo.empty() && nodeRank >= 0))
    leaveNow(kUsage,
             "give exactly one of: --host H --slot S | --world_info B64 --node_rank N | "
             "--rank_from_env");

  if (!worldInfo.empty()) {
    std::vector<std::string> forwarded = {"--coordinator", coordinatorAddress, "--join_timeout",
                                          std::to_string(joinTimeoutSeconds)};
    for (const auto& [flag, value] : {std::pair{"--tls_cert", tlsCert},
                                      {"--tls_key", tlsKey},
                                      {"--tls_ca", tlsCa},
                                      {"--relay", relay},
                                      {"--relay_keepalive_ms",
                                       relay.empty() ? "" : std::to_string(relayKeepaliveMs)}})
      if (!value.empty()) forwarded.insert(forwarded.end(), {flag, value});
    try {
      std::optional<NodeRelayOptions> relayOptions;
      if (!relay.empty()) {
        // The workers it starts read the token from the environment as usual.
        NodeRelayOptions o;
        o.coordinatorAddress = coordinatorAddress;
        o.keepalive = std::chrono::milliseconds(relayKeepaliveMs);
        o.token = takeJobToken();
        setenv(ds::kJobTokenVariable, o.token.c_str(), 1);
        o.tls = readTlsFiles(tlsCert, tlsKey, tlsCa);
        takeTlsFromEnvironment(o.tls, /*keep=*/true);
        relayOptions = std::move(o);
      }
      // The real path, so each rank's worker shows up in ps as ds-worker.
      std::_Exit(runNodeAgent(std::filesystem::read_symlink("/proc/self/exe").string(), forwarded,
                              worldInfo, nodeRank, relay, relayOptions));
    } catch (const ds::Error& e) {
      leaveNow(kUsage, std::string("node agent: ") + e.what());
    }
  }

  installTerminationHandler();  // a rank's worker (the node agent forwards signals instead)
  std::string jobToken;
  TlsFiles tls;
  JoinIdentity identity{host, slot, -1};
  try {
    jobToken = takeJobToken();
    tls = readTlsFiles(tlsCert, tlsKey, tlsCa);
    takeTlsFromEnvironment(tls);
    if (rankFromEnv) identity.rank = rankFromEnvironment();
  } catch (const ds::Error& e) {
    leaveNow(kUsage, e.what());
  }

  std::unique_ptr<CoordinatorClient> connection;
  if (relay.empty()) {
    try {
      connection = std::make_unique<CoordinatorClient>(coordinatorAddress, jobToken, tls);
    } catch (const ds::Error& e) {
      leaveNow(kJoinRefused, e.what());
    }
  } else {
    // The node is the plan's host, or this machine for ranks mpirun or srun placed.
    const std::string socket = relaySocketName(relay, rankFromEnv ? machineName() : host);
    try {
      gRelay = hostRelayIfFirst(
          {socket, coordinatorAddress, jobToken, tls, std::chrono::milliseconds(relayKeepaliveMs)});
    } catch (const ds::Error& e) {
      leaveNow(kJoinRefused, e.what());
    }
    connection = std::make_unique<CoordinatorClient>(coordinatorAddress, jobToken, ViaRelay{socket});
  }
  CoordinatorClient& client = *connection;
  JoinResult join;
  try {
    join = client.join(identity, std::chrono::seconds(joinTimeoutSeconds));
  } catch (const ds::Error& e) {
    leaveNow(kJoinRefused, std::string("join refused: ") + e.what());
  }
  startTaggingOutput(join.rank);
  if (const int placed = rankFromEnv ? localRankFromEnvironment() : -1;
      placed >= 0 && placed != join.localRank)
    std::fprintf(stderr,
                 "ds-worker: warning: rank %d was started as local rank %d, but the plan puts it "
                 "at local rank %d on %s: the launcher's placement differs from the hostfile "
                 "(LOCAL_RANK follows the plan)\n",
                 join.rank, placed, join.localRank, join.host.c_str());

  std::atomic<bool> stopRequested{false};
  std::atomic<bool> reported{false};
  std::thread watcher([&] {
    client.watch([&](CommandKind kind, const std::string& reason) {
      if (kind == CommandKind::Stop) stopRequested = true;
      if (kind == CommandKind::Abort)
        leaveNow(kAborted, "rank " + std::to_string(join.rank) + " aborted: " + reason);
      if (kind == CommandKind::CoordinatorGone && !reported)
        leaveNow(kCoordinatorGone, "rank " + std::to_string(join.rank) + ": coordinator gone (" +
                                       reason + "), exiting");
    });
  });
  watcher.detach();

  ProgressBoard board;
  std::mutex heartbeatMutex;
  std::condition_variable heartbeatWake;
  bool heartbeatStop = false, beatNow = false;
  board.onMilestone([&] {
    {
      std::lock_guard lock(heartbeatMutex);
      beatNow = true;
    }
    heartbeatWake.notify_all();
  });
  std::thread heartbeat([&] {
    std::unique_lock lock(heartbeatMutex);
    auto lastDelivered = std::chrono::steady_clock::now();
    while (!heartbeatStop) {
      lock.unlock();
      Progress progress = board.snapshot();
      progress.residentBytes = residentBytes();
      const auto now = std::chrono::steady_clock::now();
      if (client.heartbeat(progress))
        lastDelivered = now;
      else if (now - lastDelivered > join.heartbeatTimeout && !reported)
        // The coordinator has already counted this rank as failed: nothing is gained by running on.
        leaveNow(kCoordinatorGone,
                 "rank " + std::to_string(join.rank) +
                     ": no heartbeat reached the coordinator for " +
                     std::to_string(join.heartbeatTimeout.count() / 1000.0).substr(0, 5) +
                     " s (frozen or unreachable), exiting");
      lock.lock();
      heartbeatWake.wait_for(lock, join.heartbeatInterval,
                             [&] { return heartbeatStop || beatNow; });
      beatNow = false;
    }
  });

  RankReport report;
  int status = 0;
  try {
    const std::string bindAddress = localBindAddress(join.host, coordinatorAddress);
    const ds::JobSpec job = ds::parseJobArgs(join.jobArgs);
    if (job.kind == ds::JobKind::Barrier) {
      // The no-op job: every rank checks in through the coordinator's store, the last one
      // releases them all. What bench_launch times (start, join, one barrier, clean exit).
      board.setState(RankState::Rendezvous);
      CoordinatorStore store(client);
      ds::runtime::storeBarrier(store, "barrier", join.worldSize, std::chrono::minutes(5));
      if (join.rank == 0) std::printf("barrier passed by %d ranks\n", join.worldSize);
    } else if (job.kind == ds::JobKind::CommBench) {
      const ds::CommBenchOptions& options = job.bench;
      CoordinatorStore store(client);
      board.setState(RankState::Rendezvous);
      const std::unique_ptr<ds::runtime::Communicator> world =
          makeGroupFactory(join, store, bindAddress, options.backend).world();
      board.setState(RankState::Training);
      board.setPhase(std::string("ds-comm-bench ") + ds::commOpName(options.op));
      const bool correct = runCommBench(options, *world);
      ds::runtime::storeBarrier(store, "comm-bench/finished", join.worldSize,
                                std::chrono::minutes(5));
      if (!correct) {
        status = report.exitStatus = kJobFailed;
        report.error = "ds-comm-bench --check: wrong results";
      }
    } else if (job.kind == ds::JobKind::Train) {
      CoordinatorStore store(client);
      const TrainResult result =
          runTrainJob(job.train, join, store, bindAddress, board, stopRequested);
      report.steps = result.steps;
      report.lastLoss = result.lastLoss;
      report.wallSeconds = result.wallSeconds;
      report.metrics["samples_per_second"] = result.samplesPerSecond;
      report.commStats = result.commStats;
    } else {
      const auto [masterAddr, masterPort] = programMaster(join, bindAddress, client);
      const auto programArgs = programArgv(join);
      board.setState(RankState::Training);
      board.setPhase("running " + programArgs.front());
      const auto started = std::chrono::steady_clock::now();
      status =
          runProgram(programArgs, programEnvironment(join, masterAddr, masterPort), gProgramPid);
      report.wallSeconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      report.exitStatus = status;
      if (status != 0)
        report.error = status > 128
                           ? "the program was killed by signal " + std::to_string(status - 128)
                           : "the program exited with status " + std::to_string(status);
    }
    board.setState(status == 0 ? RankState::Finished : RankState::Failed);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "ds-worker: rank %d failed: %s\n", join.rank, e.what());
    report.exitStatus = status = kJobFailed;
    report.error = e.what();
    board.setState(RankState::Failed);
  }
  {
    std::lock_guard lock(heartbeatMutex);
    heartbeatStop = true;
  }
  heartbeatWake.notify_all();
  heartbeat.join();
  try {
    reported = true;
    client.report(report);
  } catch (const ds::Error& e) {
    std::fprintf(stderr, "ds-worker: rank %d could not report: %s\n", join.rank, e.what());
  }
  ds::runtime::unlinkOwnedShmSegments();
  // The node's other ranks still reach the coordinator through this process: stay until they
  // have gone (or the coordinator has).
  if (gRelay) gRelay->waitForConnections(1, std::chrono::hours(24 * 365));
  finishTaggedOutput();
  _exit(status);  // the watcher thread is parked in a stream read; nothing else to unwind
}

}  // namespace

int main(int argc, char** argv) {
  return ds::guardedMain("ds-worker", [&] { return run(argc, argv); });
}
