// The launcher-worker contract, free of gRPC: what a rank reports while it runs (RankState,
// Progress) and when it ends (RankReport), and what it can be told (CommandKind). Their wire form
// is proto/contract_conversion.h's, used by ds-launch's coordinator and ds-worker's client;
// everything else uses these types.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/collective_op.h"
#include "common/comm_stat.h"

namespace ds {

// Waiting exists only on the coordinator's side: a rank that has not joined yet.
enum class RankState { Waiting, Starting, Rendezvous, Training, Finished, Failed };
const char* rankStateName(RankState state);  // "waiting", "starting", ...

// The collective a rank is in, as its communicators recorded it (not read from `phase`): a rank
// in one waits for its peers, so a stall is not its own fault.
struct CollectiveWait {
  CollectiveOp op = CollectiveOp::AllReduce;
  std::string group;  // "world", "ranks 0,2"; empty: an unnamed group
  // When the rank entered it, in the holder's steady clock: the wire carries how long the rank
  // had waited when it sent the heartbeat, and the receiver counts back from its arrival.
  std::chrono::steady_clock::time_point since{};
};

// A heartbeat's content.
struct Progress {
  RankState state = RankState::Starting;
  int64_t step = 0;
  double loss = 0.0;
  double samplesPerSecond = 0.0;
  int64_t residentBytes = 0;
  std::string phase;  // what the rank is doing now ("step 12: all_reduce"), for stall reports
  std::optional<CollectiveWait> collective{};  // set while the rank is in a collective
};

// A rank's final report.
struct RankReport {
  int exitStatus = 0;
  std::string error;
  int64_t steps = 0;  // 0: the job reported no training progress (any external program)
  double lastLoss = 0.0;
  double wallSeconds = 0.0;
  std::map<std::string, double> metrics;
  std::vector<ds::CommStat> commStats;
};

// What the coordinator tells ranks. CoordinatorGone is never sent: a worker's client reports it
// when the command stream ends or breaks.
enum class CommandKind { Stop, Abort, CoordinatorGone };

// Mutual TLS material (PEM contents, not paths); an empty certificate means plaintext.
struct TlsFiles {
  std::string certPem, keyPem, caPem;
};

// Where the job token travels: the environment of ds-launch's children, ssh's forwarded LC_*
// variable, or a file only its owner can read.
inline constexpr const char* kJobTokenVariable = "DS_JOB_TOKEN";
inline constexpr const char* kSshTokenVariable = "LC_DS_JOB_TOKEN";
inline constexpr const char* kJobTokenFileVariable = "DS_JOB_TOKEN_FILE";
// --tls-auto: the job's certificate, key and CA (PEM text) reach workers in these variables,
// which a worker reads and then erases from its environment.
inline constexpr const char* kTlsCertPemVariable = "DS_TLS_CERT_PEM";
inline constexpr const char* kTlsKeyPemVariable = "DS_TLS_KEY_PEM";
inline constexpr const char* kTlsCaPemVariable = "DS_TLS_CA_PEM";

}  // namespace ds
