// ProcessTopology as closed-form row-major arithmetic: DeepSpeed enumerates the cartesian product
// into a dictionary; rank = sum of coord[i] * strides[i] is the same mapping without the table.
#include "runtime/parallel/topology.h"

#include <algorithm>
#include <limits>

#include "common/error.h"

namespace ds::runtime {
namespace {

std::string describe(const std::vector<AxisValue>& values) {
  std::string text;
  for (const AxisValue& v : values)
    text += (text.empty() ? "" : ", ") + v.axis + "=" + std::to_string(v.value);
  return "(" + text + ")";
}

}  // namespace

ProcessTopology::ProcessTopology(std::vector<std::string> axes, std::vector<int> dims)
    : axes_(std::move(axes)), dims_(std::move(dims)) {
  if (axes_.empty()) throw Error("topology: no axes given");
  if (axes_.size() != dims_.size())
    throw Error("topology: " + std::to_string(axes_.size()) + " axes but " +
                std::to_string(dims_.size()) + " sizes");
  for (size_t i = 0; i < axes_.size(); ++i) {
    if (axes_[i].empty()) throw Error("topology: axis " + std::to_string(i) + " has no name");
    if (std::find(axes_.begin(), axes_.begin() + i, axes_[i]) != axes_.begin() + i)
      throw Error("topology: axis \"" + axes_[i] + "\" is named twice");
    if (dims_[i] < 1)
      throw Error("topology: axis \"" + axes_[i] + "\" has size " + std::to_string(dims_[i]) +
                  "; every axis needs at least 1 rank");
    if (world_ > std::numeric_limits<int>::max() / dims_[i])
      throw Error("topology: the product of the axis sizes does not fit in an int");
    world_ *= dims_[i];
  }
  strides_.assign(dims_.size(), 1);
  for (size_t i = dims_.size() - 1; i > 0; --i) strides_[i - 1] = strides_[i] * dims_[i];
}

int ProcessTopology::axisIndex(std::string_view axis, const char* what) const {
  const auto it = std::find(axes_.begin(), axes_.end(), axis);
  if (it == axes_.end()) {
    std::string known;
    for (const auto& a : axes_) known += (known.empty() ? "" : ", ") + a;
    throw Error(std::string("topology ") + what + ": no axis \"" + std::string(axis) +
                "\" (axes: " + known + ")");
  }
  return static_cast<int>(it - axes_.begin());
}

void ProcessTopology::checkRank(int rank) const {
  if (rank < 0 || rank >= world_)
    throw Error("topology: rank " + std::to_string(rank) + " is not in a world of " +
                std::to_string(world_));
}

int ProcessTopology::getDim(std::string_view axis) const {
  const auto it = std::find(axes_.begin(), axes_.end(), axis);
  return it == axes_.end() ? 0 : dims_[it - axes_.begin()];
}

int ProcessTopology::getRank(const std::vector<AxisValue>& coord) const {
  if (coord.size() != axes_.size())
    throw Error("topology getRank: " + describe(coord) + " names " + std::to_string(coord.size()) +
                " of " + std::to_string(axes_.size()) +
                " axes; a partial coordinate is a slice (use filterMatch)");
  std::vector<int> ordered(axes_.size(), -1);
  for (const AxisValue& v : coord) {
    const int i = axisIndex(v.axis, "getRank");
    if (ordered[i] != -1)
      throw Error("topology getRank: " + describe(coord) + " names \"" + v.axis + "\" twice");
    ordered[i] = v.value;
  }
  return getRankAt(ordered);
}

int ProcessTopology::getRankAt(const std::vector<int>& coord) const {
  if (coord.size() != axes_.size())
    throw Error("topology getRank: " + std::to_string(coord.size()) + " values for " +
                std::to_string(axes_.size()) + " axes");
  int rank = 0;
  for (size_t i = 0; i < coord.size(); ++i) {
    if (coord[i] < 0 || coord[i] >= dims_[i])
      throw Error("topology getRank: " + axes_[i] + "=" + std::to_string(coord[i]) +
                  " is outside 0.." + std::to_string(dims_[i] - 1));
    rank += coord[i] * strides_[i];
  }
  return rank;
}

std::vector<int> ProcessTopology::getCoord(int rank) const {
  checkRank(rank);
  std::vector<int> coord(axes_.size());
  for (size_t i = 0; i < axes_.size(); ++i) coord[i] = rank / strides_[i] % dims_[i];
  return coord;
}

int ProcessTopology::getCoord(int rank, std::string_view axis) const {
  checkRank(rank);
  const int i = axisIndex(axis, "getCoord");
  return rank / strides_[i] % dims_[i];
}

std::vector<std::vector<int>> ProcessTopology::getAxisCommLists(std::string_view axis) const {
  const auto it = std::find(axes_.begin(), axes_.end(), axis);
  if (it == axes_.end()) return {};
  const auto a = static_cast<size_t>(it - axes_.begin());
  // Ranks with coordinate 0 on `axis` enumerate the other axes' combinations in rank order,
  // which is the row-major order of the other axes: DeepSpeed's order of the lists.
  std::vector<std::vector<int>> lists;
  for (int rank = 0; rank < world_; ++rank) {
    if (rank / strides_[a] % dims_[a] != 0) continue;
    std::vector<int>& list = lists.emplace_back();
    for (int k = 0; k < dims_[a]; ++k) list.push_back(rank + k * strides_[a]);
  }
  return lists;
}

std::vector<int> ProcessTopology::filterMatch(const std::vector<AxisValue>& match) const {
  std::vector<std::pair<int, int>> wanted;  // (axis index, value)
  for (const AxisValue& v : match) wanted.emplace_back(axisIndex(v.axis, "filterMatch"), v.value);
  std::vector<int> ranks;
  for (int rank = 0; rank < world_; ++rank) {
    const bool matches = std::all_of(wanted.begin(), wanted.end(), [&](const auto& w) {
      return rank / strides_[w.first] % dims_[w.first] == w.second;
    });
    if (matches) ranks.push_back(rank);
  }
  return ranks;
}

std::vector<int> ProcessTopology::getAxisList(std::string_view axis, int index) const {
  return filterMatch({{std::string(axis), index}});
}

std::string ProcessTopology::getRankRepr(int rank, const std::vector<std::string>& omitAxes) const {
  const std::vector<int> coord = getCoord(rank);
  std::string repr;
  for (size_t i = 0; i < axes_.size(); ++i) {
    if (std::find(omitAxes.begin(), omitAxes.end(), axes_[i]) != omitAxes.end()) continue;
    std::string value = std::to_string(coord[i]);
    if (value.size() < 2) value.insert(0, 2 - value.size(), '0');  // Python's {:02d}
    repr += (repr.empty() ? "" : "-") + axes_[i] + "_" + value;
  }
  return repr;
}

PipeModelDataTopology::PipeModelDataTopology(int pipe, int model, int data)
    : ProcessTopology({"pipe", "data", "model"}, {pipe, data, model}) {}

PipeModelDataTopology PipeModelDataTopology::forWorld(int world, int pipe, int model) {
  if (pipe < 1) throw Error("pipe-parallel size " + std::to_string(pipe) + ": expected >= 1");
  if (model < 1) throw Error("model-parallel size " + std::to_string(model) + ": expected >= 1");
  if (world < 1) throw Error("world size " + std::to_string(world) + ": expected >= 1");
  if (world % pipe != 0 || (world / pipe) % model != 0)
    throw Error("world size " + std::to_string(world) +
                " is not a multiple of pipe-parallel size " + std::to_string(pipe) +
                " x model-parallel size " + std::to_string(model) +
                ": the data-parallel size is world / (pipe x model), so choose a world of " +
                "whole pipe x model replicas");
  return PipeModelDataTopology(pipe, model, world / pipe / model);
}

int PipeModelDataTopology::stageToGlobal(int rank, int stage) const {
  std::vector<int> coord = getCoord(rank);
  coord[0] = stage;  // axis 0 is "pipe"
  return getRankAt(coord);
}

PipeNeighbours PipeModelDataTopology::pipeNeighbours(int rank) const {
  const int stage = stageOf(rank);
  PipeNeighbours n;
  if (stage > 0) n.prev = stageToGlobal(rank, stage - 1);
  if (stage + 1 < pipeParallelSize()) n.next = stageToGlobal(rank, stage + 1);
  return n;
}

std::vector<std::vector<int>> PipeModelDataTopology::p2pGroups() const {
  std::vector<std::vector<int>> groups;
  for (int rank = 0; rank < worldSize(); ++rank)
    groups.push_back({rank, stageToGlobal(rank, (stageOf(rank) + 1) % pipeParallelSize())});
  return groups;
}

}  // namespace ds::runtime
