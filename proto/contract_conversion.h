// The launcher-worker contract (contract/) to and from its wire form (coordinator.proto), written
// once for the coordinator and the worker's client. It brings protobuf's headers: include it from
// .cc files only, never from a header others include.
#pragma once

#include <chrono>
#include <optional>

#include "contract/program_options.h"
#include "contract/rank_contract.h"
#include "contract/rank_placement.h"
#include "coordinator.pb.h"

namespace ds {

// Waiting is never sent (a rank that runs has joined): it goes as UNSPECIFIED, which reads back as
// Starting, as does any state this build does not know.
proto::WorkerState toProto(RankState state);
RankState fromProto(proto::WorkerState state);

// A heartbeat's content; the request's auth, rank and relay age are the caller's. The collective
// travels as how long the rank has waited in it (steady clocks differ between processes): toProto
// measures it now, fromProto counts back from `sentAt`, when the rank sent the heartbeat, in the
// receiver's clock. A collective op this build does not know reads back as none.
void toProto(const Progress& progress, proto::HeartbeatRequest* beat);
Progress fromProto(const proto::HeartbeatRequest& beat,
                   std::chrono::steady_clock::time_point sentAt);

// A final report; the request's auth and rank are the caller's.
void toProto(const RankReport& report, proto::ReportRequest* request);
RankReport fromProto(const proto::ReportRequest& request);

void toProto(const ProgramOptions& options, proto::ProgramOptions* message);
ProgramOptions fromProto(const proto::ProgramOptions& message);

// Only the placement's fields of a join reply: the job's config, arguments, epoch, timings and the
// node's slots are written and read by the caller.
void toProto(const RankPlacement& placement, proto::JoinReply* reply);
RankPlacement placementFromProto(const proto::JoinReply& reply);

// CoordinatorGone is never sent: it goes as KIND_UNSPECIFIED, which (like any kind this build does
// not know) reads back as no command.
proto::Command::Kind toProto(CommandKind kind);
std::optional<CommandKind> fromProto(proto::Command::Kind kind);

}  // namespace ds
