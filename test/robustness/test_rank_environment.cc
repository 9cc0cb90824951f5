// Rank numbers taken from the MPI/Slurm environment: anything but a plain number in int range is
// refused naming the variable (an overflowing value must not wrap around to rank 0).
#include <stdlib.h>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "common/error.h"
#include "test/scoped_env.h"
#include "worker/rank_environment.h"

using ds::worker::localRankFromEnvironment;
using ds::test::ScopedEnv;
using ds::worker::rankFromEnvironment;

namespace {

void clearRankVariables() {
  for (const char* name :
       {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID",
        "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "PALS_LOCAL_RANKID", "SLURM_LOCALID"})
    unsetenv(name);
}

}  // namespace

TEST_CASE("rank environment: overflowing or malformed rank numbers are refused") {
  clearRankVariables();
  for (const std::string& bad : std::vector<std::string>{
           "4294967296", "2147483648", "99999999999999999999", "-1", "1x", " 1", "+"}) {
    ScopedEnv env("OMPI_COMM_WORLD_RANK", bad);
    INFO("OMPI_COMM_WORLD_RANK=" << bad);
    CHECK_THROWS_WITH(rankFromEnvironment(),
                      Catch::Contains("OMPI_COMM_WORLD_RANK=" + bad + " is not a rank number"));
  }
  {
    ScopedEnv env("SLURM_PROCID", "2147483647");
    CHECK(rankFromEnvironment() == 2147483647);
  }
  {
    ScopedEnv env("SLURM_LOCALID", "4294967297");
    CHECK_THROWS_WITH(localRankFromEnvironment(), Catch::Contains("SLURM_LOCALID=4294967297"));
  }
  {
    ScopedEnv env("MPI_LOCALRANKID", "3");
    CHECK(localRankFromEnvironment() == 3);
  }
}
