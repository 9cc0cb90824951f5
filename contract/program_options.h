// How a rank starts an external program (DeepSpeed's launch.py flags): set once on ds-launch's
// command line, carried by the coordinator's join reply, read by the worker that starts it. The
// program and its arguments are the job's arguments, not these.
#pragma once

#include <string>

namespace ds {

struct ProgramOptions {
  bool module = false;             // python -m PROGRAM
  bool noPython = false;           // exec PROGRAM directly
  bool noLocalRank = false;        // no --local_rank=N argument
  std::string python = "python3";  // interpreter for Python programs
};

}  // namespace ds
