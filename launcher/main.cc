// ds-launch: plan the job (hostfile, --include/--exclude, --num_nodes/--num_gpus, as DeepSpeed's
// runner), start the coordinator, start the workers through the chosen backend, supervise until
// the job ends, print the summary. Exit 0 only when every rank succeeded; 2 for invalid input.
#include "common/guarded_main.h"
#include "launcher/autotuning/autotuner.h"
#include "launcher/job_planning.h"
#include "launcher/job_run.h"
#include "launcher/launch_options.h"

using namespace ds::launcher;

int main(int argc, char** argv) {
  return ds::guardedMain("ds-launch", [&] {
    CommandLine line;
    if (const auto status = parseCommandLine(argc, argv, line)) return *status;
    if (!line.flags.autotuning.empty()) return runAutotuning(line);
    JobPlan plan = planJob(line);
    if (line.flags.dryRun) return printDryRun(plan, line.flags);
    return runJob(plan, line);
  });
}
