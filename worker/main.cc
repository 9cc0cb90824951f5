// ds-worker: one per rank. Joins the coordinator, keeps its command stream and heartbeats going,
// runs the job (the built-in trainer or an external program), reports, exits. Started with
// --world_info/--node_rank it is a node agent that starts one worker per slot instead. With --relay
// it reaches the coordinator through its node's relay (worker/node_relay.h), hosting it if it is
// the first of the node to bind its socket; only then does it load gRPC.
// Exit status: 0 done, 1 job failed (or the program's own status), 2 bad usage, 3 join refused,
// 10 aborted by the coordinator, 11 coordinator gone.
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"
#include "common/files.h"
#include "common/guarded_main.h"
#include "contract/forwarded_env.h"
#include "runtime/comm/shm_segment.h"
#include "worker/coordinator_client.h"
#include "worker/exit_status.h"
#include "worker/grpc_entry.h"
#include "worker/heartbeater.h"
#include "worker/local_address.h"
#include "worker/node_agent.h"
#include "worker/node_relay.h"
#include "worker/output_tagger.h"
#include "worker/progress_board.h"
#include "worker/rank_environment.h"
#include "worker/rank_job.h"
#include "worker/relay_protocol.h"
#include "worker/worker_options.h"

namespace {

using namespace ds::worker;
using ds::CommandKind;
using ds::RankReport;
using ds::TlsFiles;

std::atomic<int> gProgramPid{0};
// The node relay this worker hosts for its node, if it does: kept up until the node's other ranks
// are done, and given a moment to pass on a last command before an exit.
std::unique_ptr<RelayHost> gRelay;

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

TlsFiles readTlsFiles(const std::string& cert, const std::string& key, const std::string& ca) {
  TlsFiles tls;
  if (!cert.empty()) tls.certPem = ds::readWholeFile(cert, "PEM certificate (--tls_cert)", 1 << 20);
  if (!key.empty()) tls.keyPem = ds::readWholeFile(key, "PEM key (--tls_key)", 1 << 20);
  if (!ca.empty()) tls.caPem = ds::readWholeFile(ca, "PEM CA (--tls_ca)", 1 << 20);
  return tls;
}

// ds-worker --join: one Offer, its answer on stdout (accepted) or stderr (refused: exit 2).
int offerNode(const WorkerOptions& o) {
  const std::string host = o.host.empty() ? machineName() : o.host;
  if (o.offeredSlots < 1) leaveNow(kUsage, "--join needs --slots N (the ranks this node can run)");
  try {
    CoordinatorClient client(o.joinAddress, takeJobToken(),
                             readTlsFiles(o.tlsCert, o.tlsKey, o.tlsCa));
    const auto [accepted, message] = client.offer(host, o.offeredSlots);
    if (!accepted) leaveNow(kUsage, "the job did not take " + host + ": " + message);
    std::printf("ds-worker: %s\n", message.c_str());
    return 0;
  } catch (const ds::Error& e) {
    leaveNow(kUsage, std::string("--join: ") + e.what());
  }
}

// --world_info/--node_rank: this process becomes its node's agent, one worker per slot (and the
// node's relay with --relay).
[[noreturn]] void runNodeAgentMode(const WorkerOptions& o) {
  std::vector<std::string> forwarded = {"--coordinator", o.coordinatorAddress, "--join_timeout",
                                        std::to_string(o.joinTimeoutSeconds)};
  for (const auto& [flag, value] :
       {std::pair{"--tls_cert", o.tlsCert},
        {"--tls_key", o.tlsKey},
        {"--tls_ca", o.tlsCa},
        {"--relay", o.relay},
        {"--relay_keepalive_ms", o.relay.empty() ? "" : std::to_string(o.relayKeepaliveMs)}})
    if (!value.empty()) forwarded.insert(forwarded.end(), {flag, value});
  try {
    std::optional<NodeRelayOptions> relayOptions;
    if (!o.relay.empty()) {
      // The workers it starts read the token from the environment as usual.
      NodeRelayOptions relay;
      relay.coordinatorAddress = o.coordinatorAddress;
      relay.keepalive = std::chrono::milliseconds(o.relayKeepaliveMs);
      relay.token = takeJobToken();
      setenv(ds::kJobTokenVariable, relay.token.c_str(), 1);
      relay.tls = readTlsFiles(o.tlsCert, o.tlsKey, o.tlsCa);
      takeTlsFromEnvironment(relay.tls, /*keep=*/true);
      relayOptions = std::move(relay);
    }
    // The real path, so each rank's worker shows up in ps as ds-worker.
    std::_Exit(runNodeAgent(std::filesystem::read_symlink("/proc/self/exe").string(), forwarded,
                            o.worldInfo, o.nodeRank, o.relay, relayOptions));
  } catch (const ds::Error& e) {
    leaveNow(kUsage, std::string("node agent: ") + e.what());
  }
}

// The rank's connection to the coordinator: straight over gRPC, or through its node's relay
// (hosted by this process if it is the node's first to bind the relay's socket).
std::unique_ptr<CoordinatorClient> connectToCoordinator(const WorkerOptions& o,
                                                        const std::string& jobToken,
                                                        const TlsFiles& tls) {
  if (o.relay.empty()) {
    try {
      return std::make_unique<CoordinatorClient>(o.coordinatorAddress, jobToken, tls);
    } catch (const ds::Error& e) {
      leaveNow(kJoinRefused, e.what());
    }
  }
  // The node is the plan's host, or this machine for ranks mpirun or srun placed.
  const std::string socket = relaySocketName(o.relay, o.rankFromEnv ? machineName() : o.host);
  try {
    gRelay = hostRelayIfFirst({socket, o.coordinatorAddress, jobToken, tls,
                               std::chrono::milliseconds(o.relayKeepaliveMs)});
  } catch (const ds::Error& e) {
    leaveNow(kJoinRefused, e.what());
  }
  return std::make_unique<CoordinatorClient>(o.coordinatorAddress, jobToken, ViaRelay{socket});
}

// One rank: join, the command stream, heartbeats, the job, the report, exit.
[[noreturn]] void runRank(const WorkerOptions& o) {
  installTerminationHandler();  // a rank's worker (the node agent forwards signals instead)
  std::string jobToken;
  TlsFiles tls;
  JoinIdentity identity{o.host, o.slot, -1};
  try {
    jobToken = takeJobToken();
    tls = readTlsFiles(o.tlsCert, o.tlsKey, o.tlsCa);
    takeTlsFromEnvironment(tls);
    if (o.rankFromEnv) identity.rank = rankFromEnvironment();
  } catch (const ds::Error& e) {
    leaveNow(kUsage, e.what());
  }

  const std::unique_ptr<CoordinatorClient> connection = connectToCoordinator(o, jobToken, tls);
  CoordinatorClient& client = *connection;
  JoinResult join;
  try {
    join = client.join(identity, std::chrono::seconds(o.joinTimeoutSeconds));
  } catch (const ds::Error& e) {
    leaveNow(kJoinRefused, std::string("join refused: ") + e.what());
  }
  startTaggingOutput(join.rank);
  if (const int placed = o.rankFromEnv ? localRankFromEnvironment() : -1;
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
  Heartbeater heartbeater(
      client, board, join.heartbeatInterval, join.heartbeatTimeout, [&](const std::string& why) {
        leaveNow(kCoordinatorGone, "rank " + std::to_string(join.rank) + ": " + why + ", exiting");
      });
  const RankReport report =
      runRankJob(join, client, o.coordinatorAddress, board, stopRequested, gProgramPid);
  heartbeater.stop();
  try {
    reported = true;
    client.report(report);
  } catch (const ds::Error& e) {
    std::fprintf(stderr, "ds-worker: rank %d could not report: %s\n", join.rank, e.what());
  }
  ds::runtime::unlinkOwnedShmSegments();
  // The node's other ranks still reach the coordinator through this process: stay until every
  // one of them has joined and gone (or the coordinator has), however fast this rank finished.
  if (gRelay)
    gRelay->waitForNodeRanks(static_cast<size_t>(join.localSize), 1, std::chrono::hours(24 * 365));
  finishTaggedOutput();
  _exit(
      report.exitStatus);  // the watcher thread is parked in a stream read; nothing else to unwind
}

// The worker's whole life; main() only adds the last-resort guard.
int run(int argc, char** argv) {
  // Before anything reads the environment: ssh and pdsh deliver the job's exports in carriers.
  ds::adoptForwardedExports();
  WorkerOptions options;
  if (const std::optional<int> status = parseWorkerOptions(argc, argv, options)) return *status;
  if (!options.joinAddress.empty()) return offerNode(options);
  if (const std::string problem = usageProblem(options); !problem.empty())
    leaveNow(kUsage, problem);
  if (!options.worldInfo.empty()) runNodeAgentMode(options);
  runRank(options);
}

}  // namespace

int main(int argc, char** argv) {
  return ds::guardedMain("ds-worker", [&] { return run(argc, argv); });
}
