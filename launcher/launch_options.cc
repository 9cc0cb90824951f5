// ds-launch's flags with CLI11 (the costliest header of the project: only this file and the other
// mains include it), and the checks that relate flags to each other.
#include "launcher/launch_options.h"

#include <CLI/CLI.hpp>
#include <iostream>

#include "common/command_line.h"
#include "common/error.h"

namespace ds::launcher {
namespace {


void addFlags(CLI::App& app, LaunchOptions& flags) {
  app.add_option("-H,--hostfile", flags.hostfile,
                 "MPI-style hostfile ('host slots=N'); if missing, localhost with one rank per "
                 "GPU (or per core without GPUs)")
      ->capture_default_str();
  app.add_option("-i,--include", flags.selection.include,
                 "only these nodes/slots: NODE_SPEC[@NODE_SPEC ...], NODE_SPEC = HOST[:SLOT,SLOT]");
  app.add_option("-e,--exclude", flags.selection.exclude, "all but these nodes/slots (NODE_SPEC)");
  app.add_option("--num_nodes", flags.selection.numNodes, "use the first N hosts of the hostfile");
  app.add_option("--num_gpus,--num_accelerators", flags.selection.numGpus,
                 "use slots 0..N-1 of every host");
  app.add_option("--master_addr", flags.masterAddr,
                 "address the coordinator listens on (default: the first host when all are "
                 "loopback, else this machine's address)");
  app.add_option("--master_port", flags.masterPort, "coordinator port (0: any free port)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  app.add_option("--launcher", flags.launcher,
                 "local, ssh, pdsh, openmpi, mpich, impi, mvapich or slurm (default: local for "
                 "loopback hosts, else pdsh if installed, else ssh); netns for tests: hosts are "
                 "network namespaces named in DS_NETNS_MAP");
  app.add_option("--launcher_args", flags.launcherArgs, "extra arguments for the launcher program");
  app.add_option("--ssh_port", flags.sshPort, "ssh port for the ssh and pdsh launchers");
  app.add_flag("--force_multi", flags.forceMulti, "use the multi-node launcher even for one host");
  app.add_flag("--no_ssh", flags.noSsh,
               "start only this node's ranks (run ds-launch on every node with --node_rank and "
               "the same DS_JOB_TOKEN)");
  app.add_option("--node_rank", flags.nodeRank, "this node's index, with --no_ssh");
  app.add_flag("--no_ssh_check", flags.noSshCheck, "accepted for DeepSpeed compatibility");
  app.add_flag("--module", flags.program.module, "run PROGRAM as a Python module (python -m)");
  app.add_flag("--no_python", flags.program.noPython, "run PROGRAM directly, not through python");
  app.add_flag("--no_local_rank", flags.program.noLocalRank,
               "do not pass --local_rank=N to PROGRAM");
  app.add_option("--python", flags.program.python, "interpreter for Python programs")
      ->capture_default_str();
  app.add_option("--log_dir", flags.logDir,
                 "directory for rank-N.log files (default: ~/.local/state/ds-launch/<time>-<pid>, "
                 "under $XDG_STATE_HOME if set)");
  app.add_option("--enable_each_rank_log", flags.eachRankLog,
                 "write each rank's output to DIR/<time>_rank<N>.log (DeepSpeed's naming)");
  app.add_flag("--print_all_ranks", flags.printAllRanks,
               "show every rank's output, not only rank 0's");
  app.add_option("--heartbeat_interval", flags.heartbeatInterval,
                 "seconds between worker heartbeats")
      ->capture_default_str()
      ->check(CLI::Range(0.05, 3600.0));
  app.add_option("--heartbeat_timeout", flags.heartbeatTimeout,
                 "seconds without a heartbeat before a rank counts as failed")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 86400.0));
  app.add_option("--stall_timeout", flags.stallTimeout,
                 "seconds a heartbeating rank's step may stay the same before the job counts as "
                 "stalled (0: off)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 864000.0));
  app.add_flag("--dry-run,--dry_run", flags.dryRun,
               "print the plan and the commands; start nothing");
  app.add_flag("--json", flags.json, "with --dry-run: one JSON object on stdout");
  app.add_option("--tls-cert,--tls_cert", flags.tlsCert,
                 "PEM certificate (coordinator and workers)");
  app.add_option("--tls-key,--tls_key", flags.tlsKey, "PEM private key of --tls-cert");
  app.add_option("--tls-ca,--tls_ca", flags.tlsCa, "PEM CA that signed every peer's certificate");
  app.add_flag("--tls-auto,--tls_auto", flags.tlsAuto,
               "mutual TLS with a certificate made for this job and sent to every worker");
  app.add_flag("--elastic_training", flags.elasticTraining,
               "on a node failure, go on with the largest valid world of the survivors from the "
               "latest checkpoint (needs an enabled elasticity block)");
  app.add_option("--min_elastic_nodes", flags.minElasticNodes,
                 "elastic: fewest nodes to go on with (-1: 1)");
  app.add_option("--max_elastic_nodes", flags.maxElasticNodes,
                 "elastic: most nodes to use (-1: all selected)");
  app.add_option("--max_restarts", flags.maxRestarts,
                 "elastic: node failures survived before the job fails")
      ->check(CLI::Range(0, 1000000));
  app.add_option("--autotuning", flags.autotuning,
                 "tune: find the fastest configuration that fits (the config's autotuning "
                 "block); run: tune, then train with it")
      ->check(CLI::IsMember({"tune", "run"}));
  app.add_option("--autotuning_timeout", flags.autotuningTimeout,
                 "seconds an autotuning experiment may take before it is stopped (default 600)")
      ->check(CLI::PositiveNumber);
  app.add_flag("--rescale_now", flags.rescaleNow,
               "elastic: take a joining node at once (checkpointing first), not at the next "
               "checkpoint");
}

// Flags that are fine alone but not together.
void checkFlags(const CommandLine& line) {
  const LaunchOptions& flags = line.flags;
  if (flags.heartbeatTimeout < 2 * flags.heartbeatInterval)
    throw Error("--heartbeat_timeout " + std::to_string(flags.heartbeatTimeout) +
                " s: must be at least twice --heartbeat_interval (" +
                std::to_string(flags.heartbeatInterval) +
                " s), or one late heartbeat fails the job");
  if (flags.json && !flags.dryRun) throw Error("--json only goes with --dry-run");
  if (flags.program.module && flags.program.noPython)
    throw Error("Don't use both the '--no_python' flag and the '--module' flag at the same time.");
  if ((flags.tlsCert.empty() != flags.tlsKey.empty()) ||
      (flags.tlsCert.empty() != flags.tlsCa.empty()))
    throw Error("--tls-cert, --tls-key and --tls-ca go together: give all three");
  if (flags.tlsAuto && !flags.tlsCert.empty())
    throw Error(
        "--tls-auto makes the job's certificate itself: drop --tls-cert/--tls-key/--tls-ca");
  if (!flags.elasticTraining &&
      (flags.minElasticNodes != -1 || flags.maxElasticNodes != -1 || flags.rescaleNow))
    throw Error("--min_elastic_nodes/--max_elastic_nodes/--rescale_now only go with "
                "--elastic_training");
  if (flags.minElasticNodes == 0 || flags.minElasticNodes < -1 || flags.maxElasticNodes == 0 ||
      flags.maxElasticNodes < -1)
    throw Error("--min_elastic_nodes/--max_elastic_nodes: expected a positive node count (or -1)");
  if (flags.minElasticNodes > 0 && flags.maxElasticNodes > 0 &&
      flags.minElasticNodes > flags.maxElasticNodes)
    throw Error("--min_elastic_nodes " + std::to_string(flags.minElasticNodes) +
                " is more than --max_elastic_nodes " + std::to_string(flags.maxElasticNodes));
  if (!flags.autotuning.empty() && flags.elasticTraining)
    throw Error("--autotuning runs short experiments of fixed size: drop --elastic_training");
  if (!flags.autotuning.empty() && flags.noSsh)
    throw Error("--autotuning launches every experiment on all nodes itself: drop --no_ssh");
  if (flags.elasticTraining && flags.noSsh)
    throw Error("--elastic_training restarts ranks on the surviving nodes itself: drop --no_ssh");
  if (line.jobArgs.empty())
    throw Error(
        "no job given; try: ds-launch train --config configs/ds_config.json, or "
        "ds-launch [flags] -- PROGRAM ARGS");
}

}  // namespace

std::optional<int> parseCommandLine(int argc, char** argv, CommandLine& out) {
  CLI::App app{"ds-launch: start a distributed training job (DeepSpeed-compatible flags)"};
  addFlags(app, out.flags);
  app.prefix_command();
  app.footer(
      "JOB: 'train --config FILE [--steps N] [--seed N]' (the built-in trainer), 'barrier' (every\n"
      "     rank joins, one barrier, exit: a no-op job), 'ds-comm-bench [--op OP ...]', or\n"
      "     [--] PROGRAM [ARGS] (any program, with RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, "
      "...)");
  if (std::optional<int> status = ds::parseCommandLine(app, argc, argv)) return *status;
  out.jobArgs = app.remaining();
  const size_t flagCount = static_cast<size_t>(argc - 1) - out.jobArgs.size();
  out.flagArgs.assign(argv + 1, argv + 1 + flagCount);
  if (!out.flagArgs.empty() && out.flagArgs.back() == "--") out.flagArgs.pop_back();
  // CLI11 stops at the first argument it does not know: an option there is a mistyped flag of
  // ours (DeepSpeed's argparse refuses it too), not a program called "--bogus".
  if (!out.jobArgs.empty() && out.jobArgs[0] != "--" && out.jobArgs[0].starts_with("-"))
    throw Error("unknown option " + out.jobArgs[0] +
                " (see ds-launch --help; a program and its own options go last: "
                "ds-launch [flags] [--] PROGRAM ARGS)");
  if (!out.jobArgs.empty() && out.jobArgs[0] == "--") out.jobArgs.erase(out.jobArgs.begin());
  checkFlags(out);
  return std::nullopt;
}

}  // namespace ds::launcher
