// ds-launch's command line: the flags (DeepSpeed's runner flags plus this project's), parsed and
// checked once, and the job's arguments after them. CLI11 stays in launch_options.cc.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "contract/program_options.h"
#include "launcher/resources.h"

namespace ds::launcher {

struct LaunchOptions {
  // When ds-launch started (the options are made first thing): start-up is measured from here.
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  std::string hostfile = "/job/hostfile";
  SelectionRequest selection;
  std::string masterAddr;
  int masterPort = 29500;
  std::string launcher;
  std::string launcherArgs;
  std::optional<int> sshPort;
  bool forceMulti = false, noSsh = false, noSshCheck = false;
  int nodeRank = -1;
  ProgramOptions program;  // --module, --no_python, --no_local_rank, --python
  std::string logDir, eachRankLog = "None";
  bool printAllRanks = false;
  double heartbeatInterval = 1.0, heartbeatTimeout = 10.0, stallTimeout = 0.0;
  bool dryRun = false, json = false;
  std::string tlsCert, tlsKey, tlsCa;
  bool tlsAuto = false;  // a certificate made for this job (launcher/job_certificate.h)
  // Elastic training (DeepSpeed's runner flags): on a node failure the job goes on with the
  // largest valid world on the surviving nodes, from the latest checkpoint.
  bool elasticTraining = false;
  int minElasticNodes = -1, maxElasticNodes = -1;  // -1: 1, and no limit (joins welcome)
  int maxRestarts = 3;  // failures survived before the job fails (torchelastic's default)
  bool rescaleNow = false;  // a joining node is taken at once, not at the next checkpoint
  // --autotuning tune|run (DeepSpeed's runner flag; launcher/autotuning/autotuner.h): "" when off.
  std::string autotuning;
  int autotuningTimeout = 600;  // seconds an experiment may take before it is stopped
};

struct CommandLine {
  LaunchOptions flags;
  std::vector<std::string> jobArgs;  // JOB [ARGS], without a leading "--"
  std::vector<std::string> flagArgs;  // the flags as given, before JOB (an experiment reuses them)
};

// Parses and checks argv into `out`. Returns the status to exit with when parsing ends the run
// (--help: 0; a bad or contradictory flag: 2, the message on stderr), nullopt to go on.
std::optional<int> parseCommandLine(int argc, char** argv, CommandLine& out);

}  // namespace ds::launcher
