// The contract's wire form (proto/contract_conversion.h): every contract value survives the trip
// through its serialized message, and the coordinator's program options and plan entry reach a
// joining worker as they were given.
#include <catch2/catch.hpp>

#include "launcher/coordinator.h"
#include "proto/contract_conversion.h"
#include "worker/coordinator_client.h"

using namespace ds;
using namespace std::chrono_literals;

namespace {

// Serialized and parsed back, as the wire does it.
template <typename Message>
Message overTheWire(const Message& message) {
  Message parsed;
  REQUIRE(parsed.ParseFromString(message.SerializeAsString()));
  return parsed;
}

}  // namespace

TEST_CASE("contract conversion: rank states round-trip, Waiting is never sent") {
  for (RankState state : {RankState::Starting, RankState::Rendezvous, RankState::Training,
                          RankState::Finished, RankState::Failed})
    CHECK(fromProto(toProto(state)) == state);
  CHECK(toProto(RankState::Waiting) == proto::WORKER_STATE_UNSPECIFIED);
  CHECK(fromProto(proto::WORKER_STATE_UNSPECIFIED) == RankState::Starting);
}

TEST_CASE("contract conversion: a heartbeat carries every Progress field") {
  const auto entered = std::chrono::steady_clock::now() - 2s;
  Progress sent{RankState::Training, 42, 0.125, 3000.5, int64_t{5} << 30, "step 42: all_reduce"};
  sent.collective = CollectiveWait{CollectiveOp::AllGather, "ranks 0,2", entered};
  proto::HeartbeatRequest beat;
  beat.set_rank(3);
  toProto(sent, &beat);
  const proto::HeartbeatRequest received = overTheWire(beat);
  CHECK(received.rank() == 3);  // the caller's field, left alone
  const Progress got = fromProto(received, std::chrono::steady_clock::now());
  CHECK(got.state == sent.state);
  CHECK(got.step == sent.step);
  CHECK(got.loss == sent.loss);
  CHECK(got.samplesPerSecond == sent.samplesPerSecond);
  CHECK(got.residentBytes == sent.residentBytes);
  CHECK(got.phase == sent.phase);
  REQUIRE(got.collective);
  CHECK(got.collective->op == CollectiveOp::AllGather);
  CHECK(got.collective->group == "ranks 0,2");
  // Sent as a wait in milliseconds and counted back from the arrival: the same moment, give or
  // take the time the trip took here.
  CHECK(got.collective->since >= entered - 5ms);
  CHECK(got.collective->since <= entered + 1s);
}

TEST_CASE("contract conversion: no collective, or one this build does not know, reads as none") {
  proto::HeartbeatRequest beat;
  toProto(Progress{}, &beat);
  CHECK_FALSE(beat.has_collective());
  CHECK_FALSE(fromProto(overTheWire(beat), std::chrono::steady_clock::now()).collective);
  beat.mutable_collective()->set_op(static_cast<proto::CollectiveOp>(kCollectiveOpCount + 1));
  CHECK_FALSE(fromProto(overTheWire(beat), std::chrono::steady_clock::now()).collective);
}

TEST_CASE("contract conversion: a report carries its metrics and comms statistics") {
  RankReport sent;
  sent.exitStatus = 7;
  sent.error = "the program exited with status 7";
  sent.steps = 12;
  sent.lastLoss = 0.5;
  sent.wallSeconds = 3.25;
  sent.metrics = {{"samples_per_second", 128.0}, {"tokens", 4096.0}};
  sent.commStats = {{ds::CollectiveOp::AllReduce, 1 << 20, 12, 0.5, 0.01, 0.1, "data (ranks 0,2)", 2},
                    {ds::CollectiveOp::Broadcast, 64, 1, 0, 0, 0, "world", 4}};
  proto::ReportRequest request;
  toProto(sent, &request);
  const RankReport got = fromProto(overTheWire(request));
  CHECK(got.exitStatus == sent.exitStatus);
  CHECK(got.error == sent.error);
  CHECK(got.steps == sent.steps);
  CHECK(got.lastLoss == sent.lastLoss);
  CHECK(got.wallSeconds == sent.wallSeconds);
  CHECK(got.metrics == sent.metrics);
  REQUIRE(got.commStats.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    CHECK(got.commStats[i].op == sent.commStats[i].op);
    CHECK(got.commStats[i].bytes == sent.commStats[i].bytes);
    CHECK(got.commStats[i].count == sent.commStats[i].count);
    CHECK(got.commStats[i].totalSeconds == sent.commStats[i].totalSeconds);
    CHECK(got.commStats[i].minSeconds == sent.commStats[i].minSeconds);
    CHECK(got.commStats[i].maxSeconds == sent.commStats[i].maxSeconds);
    CHECK(got.commStats[i].group == sent.commStats[i].group);
    CHECK(got.commStats[i].groupSize == sent.commStats[i].groupSize);
  }
  // The op travels as its name; one this build does not know joins no summary.
  CHECK(request.comm_stats(0).op() == "all_reduce");
  proto::ReportRequest unknown = request;
  unknown.mutable_comm_stats(1)->set_op("scatter");
  const RankReport kept = fromProto(overTheWire(unknown));
  REQUIRE(kept.commStats.size() == 1);
  CHECK(kept.commStats[0].op == ds::CollectiveOp::AllReduce);
}

TEST_CASE("contract conversion: program options and placement round-trip") {
  const ProgramOptions program{true, false, true, "/opt/python3.11"};
  proto::JoinReply reply;
  toProto(program, reply.mutable_program());
  const RankPlacement placement{5, "node-b", 3, 1, 4, 1, 2, 8};
  toProto(placement, &reply);
  const proto::JoinReply received = overTheWire(reply);
  const ProgramOptions gotProgram = fromProto(received.program());
  CHECK(gotProgram.module == program.module);
  CHECK(gotProgram.noPython == program.noPython);
  CHECK(gotProgram.noLocalRank == program.noLocalRank);
  CHECK(gotProgram.python == program.python);
  const RankPlacement got = placementFromProto(received);
  CHECK(got.rank == 5);
  CHECK(got.host == "node-b");
  CHECK(got.slot == 3);
  CHECK(got.localRank == 1);
  CHECK(got.localSize == 4);
  CHECK(got.nodeRank == 1);
  CHECK(got.nodeCount == 2);
  CHECK(got.worldSize == 8);
}

TEST_CASE("contract conversion: stop and abort are sent, CoordinatorGone never is") {
  CHECK(fromProto(toProto(CommandKind::Stop)) == CommandKind::Stop);
  CHECK(fromProto(toProto(CommandKind::Abort)) == CommandKind::Abort);
  CHECK(toProto(CommandKind::CoordinatorGone) == proto::Command::KIND_UNSPECIFIED);
  CHECK_FALSE(fromProto(proto::Command::KIND_UNSPECIFIED).has_value());
}

TEST_CASE("contract conversion: a joining worker gets the coordinator's program options and plan") {
  launcher::CoordinatorOptions options;
  options.bindAddress = "127.0.0.1";
  options.token = "secret-token-0123456789abcdef";
  options.jobArgs = {"prog.py"};
  options.program = {false, true, true, "python3.12"};
  // worldSize left at its default in the plan: the coordinator's world is the plan's size.
  options.ranks = {{0, "127.0.0.1", 0, 0, 1, 0, 2}, {1, "127.0.0.2", 4, 0, 1, 1, 2}};
  launcher::Coordinator coordinator(options);
  worker::CoordinatorClient client(coordinator.address(), options.token);
  const worker::JoinResult join = client.join({"127.0.0.2", 4}, 5s);
  CHECK(join.rank == 1);
  CHECK(join.worldSize == 2);
  CHECK(join.host == "127.0.0.2");
  CHECK(join.slot == 4);
  CHECK(join.nodeRank == 1);
  CHECK(join.nodeCount == 2);
  CHECK(join.program.module == false);
  CHECK(join.program.noPython == true);
  CHECK(join.program.noLocalRank == true);
  CHECK(join.program.python == "python3.12");
  coordinator.shutdown();
}
