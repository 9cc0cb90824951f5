// The flags of ds-worker, their help, and the rule that exactly one mode is given.
#include "worker/worker_options.h"

#include <CLI/CLI.hpp>

#include "worker/exit_status.h"

namespace ds::worker {

std::optional<int> parseWorkerOptions(int argc, char** argv, WorkerOptions& out) {
  CLI::App app{"ds-worker: one rank of a ds-launch job (started by ds-launch)"};
  app.add_option("--coordinator", out.coordinatorAddress, "coordinator host:port");
  app.add_option("--join", out.joinAddress,
                 "offer this node (--host NAME, --slots N) to the running elastic job whose "
                 "coordinator is at host:port; needs the job's DS_JOB_TOKEN");
  app.add_option("--slots", out.offeredSlots, "with --join: the ranks this node can run");
  app.add_option("--host", out.host, "this node's name in the launch plan; Gloo binds to it");
  app.add_option("--slot", out.slot, "slot id on this host");
  app.add_option("--world_info", out.worldInfo, "node agent: the job's nodes and slots (base64)");
  app.add_option("--node_rank", out.nodeRank, "node agent: this node's index in --world_info");
  app.add_flag("--rank_from_env", out.rankFromEnv,
               "take the rank from OMPI_COMM_WORLD_RANK/PMIX_RANK/PMI_RANK/SLURM_PROCID");
  app.add_option("--join_timeout", out.joinTimeoutSeconds, "seconds to wait for the coordinator");
  app.add_option("--relay", out.relay,
                 "reach the coordinator through this node's relay (ds-launch's per-launch id): "
                 "the first worker of the node (or its node agent) hosts it");
  app.add_option("--relay_keepalive_ms", out.relayKeepaliveMs,
                 "the relay pings the coordinator this often and gives up after as long again")
      ->check(CLI::Range(50, 600000));
  app.add_option("--tls_cert", out.tlsCert, "PEM certificate for mutual TLS");
  app.add_option("--tls_key", out.tlsKey, "PEM private key for mutual TLS");
  app.add_option("--tls_ca", out.tlsCa, "PEM CA certificate that signed the coordinator's");
  return ds::parseCommandLine(app, argc, argv);
}

std::string usageProblem(const WorkerOptions& o) {
  if (o.coordinatorAddress.empty()) return "--coordinator HOST:PORT is required";
  const int modes =
      (!o.host.empty() || o.slot >= 0) + (!o.worldInfo.empty() || o.nodeRank >= 0) + o.rankFromEnv;
  if (modes != 1 || (!o.host.empty() && o.slot < 0) || (o.host.empty() && o.slot >= 0) ||
      (!o.worldInfo.empty() && o.nodeRank < 0) || (o.worldInfo.empty() && o.nodeRank >= 0))
    return "give exactly one of: --host H --slot S | --world_info B64 --node_rank N | "
           "--rank_from_env";
  return "";
}

}  // namespace ds::worker
