// Rank variables of OpenMPI, PMIx, PMI (MPICH, Intel MPI, MVAPICH) and Slurm.
#include "worker/rank_environment.h"

#include <cerrno>
#include <cstdlib>
#include <limits>
#include <string>

#include "common/error.h"

namespace ds::worker {
namespace {

// A rank number from the environment: decimal digits only, within int (strtol alone would take
// "4294967296" as a long and a cast would wrap it to rank 0).
int parseRankNumber(const char* variable, const char* text) {
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text, &end, 10);
  if (text[0] < '0' || text[0] > '9' || *end != '\0' || errno == ERANGE || value < 0 ||
      value > std::numeric_limits<int>::max())
    throw Error(std::string(variable) + "=" + text + " is not a rank number (expected 0.." +
                std::to_string(std::numeric_limits<int>::max()) + ")");
  return static_cast<int>(value);
}

}  // namespace

int rankFromEnvironment() {
  struct Source {
    const char* variable;
    const char* launcher;
  };
  const Source sources[] = {{"OMPI_COMM_WORLD_RANK", "OpenMPI"},
                            {"PMIX_RANK", "PMIx"},
                            {"PMI_RANK", "MPICH/Intel MPI/MVAPICH"},
                            {"SLURM_PROCID", "Slurm"}};
  int rank = -1;
  std::string from;
  for (const auto& source : sources) {
    const char* text = std::getenv(source.variable);
    if (text == nullptr || *text == '\0') continue;
    const int value = parseRankNumber(source.variable, text);
    // PMIX_RANK and PMI_RANK both set must agree (DeepSpeed's launcher_helper checks the same).
    if (rank >= 0 && value != rank && std::string(source.variable) == "PMI_RANK" &&
        from == "PMIX_RANK")
      throw Error("rank number doesn't match: PMIX_RANK=" + std::to_string(rank) +
                  " but PMI_RANK=" + text);
    if (rank < 0) {
      rank = value;
      from = source.variable;
    }
  }
  if (rank < 0)
    throw Error(
        "--rank_from_env: none of OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK, SLURM_PROCID is set; "
        "start ds-worker through mpirun or srun (ds-launch --launcher openmpi|mpich|impi|mvapich|"
        "slurm does this)");
  return rank;
}

int localRankFromEnvironment() {
  for (const char* name :
       {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "PALS_LOCAL_RANKID", "SLURM_LOCALID"})
    if (const char* text = std::getenv(name); text != nullptr && *text != '\0')
      return parseRankNumber(name, text);
  return -1;
}

}  // namespace ds::worker
