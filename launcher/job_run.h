// Running a planned ds-launch job: the job token, the coordinator, the processes of the chosen
// backend, supervision until the job ends, and the final report. Teardown on every path is the
// supervisor's (launcher/job_supervisor.h).
#pragma once

#include "launcher/job_planning.h"

namespace ds::launcher {

// Returns ds-launch's exit status: 0, the failing rank's status, or 128 + signal.
int runJob(JobPlan& plan, const CommandLine& line);

}  // namespace ds::launcher
