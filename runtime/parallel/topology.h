// Rank layout on a grid of named axes, with DeepSpeed's semantics (runtime/pipe/topology.py):
// ProcessTopology is row-major over its axes (the last varies fastest), and PipeModelDataTopology
// is its PipeModelDataParallelTopology (axes pipe, data, model). Pure arithmetic: building the
// communicators is topology_groups.h's job, and nothing here knows about configs.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ds::runtime {

// One axis's coordinate, by name: DeepSpeed's keyword arguments (get_rank(pipe=1, data=0, ...)).
struct AxisValue {
  std::string axis;
  int value = 0;
};

class ProcessTopology {
 public:
  // Every axis named once, every size at least 1; the world is the product of the sizes.
  ProcessTopology(std::vector<std::string> axes, std::vector<int> dims);

  const std::vector<std::string>& axes() const { return axes_; }
  // The number of ranks along `axis`; 0 for an axis this topology does not have, as DeepSpeed's
  // get_dim, so hybrid code can ask about any axis.
  int getDim(std::string_view axis) const;
  int worldSize() const { return world_; }

  // The rank at a full coordinate: every axis exactly once, in any order (a partial one is
  // filterMatch's job, as in DeepSpeed).
  int getRank(const std::vector<AxisValue>& coord) const;
  // The same, with one value per axis in axis order.
  int getRankAt(const std::vector<int>& coord) const;
  // A rank's coordinate, one value per axis in axis order.
  std::vector<int> getCoord(int rank) const;
  // One axis of a rank's coordinate.
  int getCoord(int rank, std::string_view axis) const;

  // The groups along `axis`: one list per combination of the other axes (the first of them
  // varying slowest), each list ordered by its coordinate on `axis`. Empty for an unknown axis.
  std::vector<std::vector<int>> getAxisCommLists(std::string_view axis) const;
  // Ranks whose coordinate matches every given axis value, in rank order.
  std::vector<int> filterMatch(const std::vector<AxisValue>& match) const;
  // Ranks whose coordinate on `axis` is `index` (DeepSpeed's get_axis_list).
  std::vector<int> getAxisList(std::string_view axis, int index) const;
  // DeepSpeed's get_rank_repr: "model_01" style names for the axes not omitted, joined with '-'
  // (what its checkpoints name a rank's files by).
  std::string getRankRepr(int rank,
                          const std::vector<std::string>& omitAxes = {"data", "pipe"}) const;

 private:
  int axisIndex(std::string_view axis, const char* what) const;  // throws for an unknown axis
  void checkRank(int rank) const;
  std::vector<std::string> axes_;
  std::vector<int> dims_;
  std::vector<int> strides_;  // row-major: strides_[i] = product of dims_ after i
  int world_ = 1;
};

// A rank's pipeline neighbours: the ranks one stage before and after it with the same data and
// model coordinates; none before the first stage nor after the last (no wrap-around).
struct PipeNeighbours {
  std::optional<int> prev;
  std::optional<int> next;
};

// DeepSpeed's PipeModelDataParallelTopology(num_pp, num_mp, num_dp): axes pipe, data, model,
// model varying fastest, so rank = (pipe * data_size + data) * model_size + model.
class PipeModelDataTopology : public ProcessTopology {
 public:
  PipeModelDataTopology(int pipe, int model, int data);
  // The data-parallel size DeepSpeed's mpu reports for a world: world / (pipe x model). A world
  // that is not a multiple of pipe x model is refused.
  static PipeModelDataTopology forWorld(int world, int pipe, int model);

  int pipeParallelSize() const { return getDim("pipe"); }
  int modelParallelSize() const { return getDim("model"); }
  // What the batch rules divide by (DeepSpeed's config with an mpu).
  int dataParallelSize() const { return getDim("data"); }

  int stageOf(int rank) const { return getCoord(rank, "pipe"); }
  // PipelineParallelGrid.stage_to_global: the rank at `stage` with `rank`'s data and model.
  int stageToGlobal(int rank, int stage) const;
  PipeNeighbours pipeNeighbours(int rank) const;
  // PipelineParallelGrid.build_p2p_groups: for each rank in order, [rank, next stage's rank],
  // the last stage wrapping to the first (with one stage, [rank, rank]).
  std::vector<std::vector<int>> p2pGroups() const;
};

}  // namespace ds::runtime
