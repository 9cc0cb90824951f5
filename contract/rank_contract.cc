// Names of the rank states, as the live view and the state dump show them.
#include "contract/rank_contract.h"

namespace ds {

const char* rankStateName(RankState state) {
  switch (state) {
    case RankState::Waiting:
      return "waiting";
    case RankState::Starting:
      return "starting";
    case RankState::Rendezvous:
      return "rendezvous";
    case RankState::Training:
      return "training";
    case RankState::Finished:
      return "finished";
    case RankState::Failed:
      return "failed";
  }
  return "?";
}

}  // namespace ds
