// A worker's identity when mpirun or srun started it: read from their environment variables.
#pragma once

namespace ds::worker {

// The global rank from the MPI or Slurm environment (OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK,
// SLURM_PROCID); throws ds::Error naming the variables when none is set or two disagree.
int rankFromEnvironment();

// The local rank mpirun/srun gave this process (OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID,
// PALS_LOCAL_RANKID, SLURM_LOCALID), or -1 when none is set.
int localRankFromEnvironment();

}  // namespace ds::worker
