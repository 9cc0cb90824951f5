// Field by field, so that a field added to a contract type or its message shows up here, once.
#include "proto/contract_conversion.h"

#include <algorithm>
#include <cstdint>

namespace ds {

proto::WorkerState toProto(RankState state) {
  switch (state) {
    case RankState::Starting:
      return proto::WORKER_STATE_STARTING;
    case RankState::Rendezvous:
      return proto::WORKER_STATE_RENDEZVOUS;
    case RankState::Training:
      return proto::WORKER_STATE_TRAINING;
    case RankState::Finished:
      return proto::WORKER_STATE_FINISHED;
    case RankState::Failed:
      return proto::WORKER_STATE_FAILED;
    case RankState::Waiting:
      break;
  }
  return proto::WORKER_STATE_UNSPECIFIED;
}

RankState fromProto(proto::WorkerState state) {
  switch (state) {
    case proto::WORKER_STATE_STARTING:
      return RankState::Starting;
    case proto::WORKER_STATE_RENDEZVOUS:
      return RankState::Rendezvous;
    case proto::WORKER_STATE_TRAINING:
      return RankState::Training;
    case proto::WORKER_STATE_FINISHED:
      return RankState::Finished;
    case proto::WORKER_STATE_FAILED:
      return RankState::Failed;
    default:
      return RankState::Starting;
  }
}

static_assert(proto::CollectiveOp_ARRAYSIZE == kCollectiveOpCount + 1,
              "proto CollectiveOp: UNSPECIFIED, then ds::CollectiveOp's values in order");

void toProto(const Progress& progress, proto::HeartbeatRequest* beat) {
  beat->set_state(toProto(progress.state));
  beat->set_step(progress.step);
  beat->set_loss(progress.loss);
  beat->set_samples_per_sec(progress.samplesPerSecond);
  beat->set_resident_bytes(progress.residentBytes);
  beat->set_phase(progress.phase);
  if (progress.collective) {
    proto::InCollective* in = beat->mutable_collective();
    in->set_op(static_cast<proto::CollectiveOp>(static_cast<int>(progress.collective->op) + 1));
    in->set_group(progress.collective->group);
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - progress.collective->since);
    in->set_waited_ms(static_cast<uint64_t>(std::max<int64_t>(0, waited.count())));
  }
}

namespace {

std::optional<CollectiveWait> fromProto(const proto::InCollective& in,
                                        std::chrono::steady_clock::time_point sentAt) {
  if (in.op() <= proto::COLLECTIVE_OP_UNSPECIFIED || in.op() > kCollectiveOpCount)
    return std::nullopt;
  constexpr uint64_t kLongestWaitMs = uint64_t{30} * 24 * 3600 * 1000;  // keeps the sum in range
  return CollectiveWait{
      static_cast<CollectiveOp>(in.op() - 1), in.group(),
      sentAt - std::chrono::milliseconds(std::min(in.waited_ms(), kLongestWaitMs))};
}

}  // namespace

Progress fromProto(const proto::HeartbeatRequest& beat,
                   std::chrono::steady_clock::time_point sentAt) {
  Progress progress;
  progress.state = fromProto(beat.state());
  progress.step = beat.step();
  progress.loss = beat.loss();
  progress.samplesPerSecond = beat.samples_per_sec();
  progress.residentBytes = beat.resident_bytes();
  progress.phase = beat.phase();
  if (beat.has_collective()) progress.collective = fromProto(beat.collective(), sentAt);
  return progress;
}

void toProto(const RankReport& report, proto::ReportRequest* request) {
  request->set_exit_status(report.exitStatus);
  request->set_error(report.error);
  request->set_steps(report.steps);
  request->set_last_loss(report.lastLoss);
  request->set_wall_seconds(report.wallSeconds);
  for (const auto& [name, value] : report.metrics) (*request->mutable_metrics())[name] = value;
  for (const auto& stat : report.commStats) {
    proto::CommStat* row = request->add_comm_stats();
    row->set_op(collectiveOpName(stat.op));
    row->set_bytes(stat.bytes);
    row->set_count(stat.count);
    row->set_total_seconds(stat.totalSeconds);
    row->set_min_seconds(stat.minSeconds);
    row->set_max_seconds(stat.maxSeconds);
    row->set_group(stat.group);
    row->set_group_size(stat.groupSize);
  }
}

RankReport fromProto(const proto::ReportRequest& request) {
  RankReport report;
  report.exitStatus = request.exit_status();
  report.error = request.error();
  report.steps = request.steps();
  report.lastLoss = request.last_loss();
  report.wallSeconds = request.wall_seconds();
  report.metrics.insert(request.metrics().begin(), request.metrics().end());
  for (const auto& row : request.comm_stats())
    // A row of an op this build does not know (another version's worker) has no summary to join.
    if (const std::optional<CollectiveOp> op = collectiveOpFromName(row.op()))
      report.commStats.push_back({*op, row.bytes(), row.count(), row.total_seconds(),
                                  row.min_seconds(), row.max_seconds(), row.group(),
                                  row.group_size()});
  return report;
}

void toProto(const ProgramOptions& options, proto::ProgramOptions* message) {
  message->set_module(options.module);
  message->set_no_python(options.noPython);
  message->set_no_local_rank(options.noLocalRank);
  message->set_python(options.python);
}

ProgramOptions fromProto(const proto::ProgramOptions& message) {
  ProgramOptions options;
  options.module = message.module();
  options.noPython = message.no_python();
  options.noLocalRank = message.no_local_rank();
  options.python = message.python();
  return options;
}

void toProto(const RankPlacement& placement, proto::JoinReply* reply) {
  reply->set_rank(placement.rank);
  reply->set_host(placement.host);
  reply->set_slot(placement.slot);
  reply->set_local_rank(placement.localRank);
  reply->set_local_size(placement.localSize);
  reply->set_node_rank(placement.nodeRank);
  reply->set_node_count(placement.nodeCount);
  reply->set_world_size(placement.worldSize);
}

RankPlacement placementFromProto(const proto::JoinReply& reply) {
  RankPlacement placement;
  placement.rank = reply.rank();
  placement.host = reply.host();
  placement.slot = reply.slot();
  placement.localRank = reply.local_rank();
  placement.localSize = reply.local_size();
  placement.nodeRank = reply.node_rank();
  placement.nodeCount = reply.node_count();
  placement.worldSize = reply.world_size();
  return placement;
}

proto::Command::Kind toProto(CommandKind kind) {
  switch (kind) {
    case CommandKind::Stop:
      return proto::Command::STOP;
    case CommandKind::Abort:
      return proto::Command::ABORT;
    case CommandKind::CoordinatorGone:
      break;
  }
  return proto::Command::KIND_UNSPECIFIED;
}

std::optional<CommandKind> fromProto(proto::Command::Kind kind) {
  switch (kind) {
    case proto::Command::STOP:
      return CommandKind::Stop;
    case proto::Command::ABORT:
      return CommandKind::Abort;
    default:
      return std::nullopt;
  }
}

}  // namespace ds
