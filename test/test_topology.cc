// The pipe x data x model layout against DeepSpeed's topology.py: hand-computed ranks, coordinates
// and group lists for several shapes (the examples of its docstrings among them), a second,
// table-based enumeration written from its definition over every small shape, the refusals, and the
// batch rules' mpu case (data-parallel size = world / (pipe x model)).
#include <catch2/catch.hpp>
#include <map>
#include <optional>
#include <vector>

#include "common/error.h"
#include "runtime/config/batch_size.h"
#include "runtime/parallel/topology.h"

using namespace ds;
using namespace ds::runtime;
using Lists = std::vector<std::vector<int>>;

namespace {

// DeepSpeed's ProcessTopology by its definition: enumerate the cartesian product of the axes (first
// slowest) into a coordinate -> rank table, and build each list by looking coordinates up.
struct EnumeratedTopology {
  std::vector<int> dims;
  std::map<std::vector<int>, int> rankOf;

  explicit EnumeratedTopology(std::vector<int> d) : dims(std::move(d)) {
    std::vector<int> coord(dims.size(), 0);
    for (int rank = 0;; ++rank) {
      rankOf[coord] = rank;
      int axis = static_cast<int>(dims.size()) - 1;
      while (axis >= 0 && ++coord[axis] == dims[axis]) coord[axis--] = 0;
      if (axis < 0) break;
    }
  }
  Lists axisCommLists(size_t axis) const {
    Lists lists;
    for (const auto& [coord, rank] : rankOf) {  // map order = the other axes' product order
      if (coord[axis] != 0) continue;
      std::vector<int> list;
      std::vector<int> key = coord;
      for (int k = 0; k < dims[axis]; ++k) {
        key[axis] = k;
        list.push_back(rankOf.at(key));
      }
      lists.push_back(list);
    }
    return lists;
  }
};

}  // namespace

TEST_CASE("topology: pipe 2 x data 2 x model 2, as DeepSpeed lays it out", "[topology]") {
  const PipeModelDataTopology t(/*pipe=*/2, /*model=*/2, /*data=*/2);
  REQUIRE(t.axes() == std::vector<std::string>{"pipe", "data", "model"});
  REQUIRE(t.worldSize() == 8);
  // rank = (pipe * 2 + data) * 2 + model: model varies fastest, pipe slowest.
  const Lists coords = {{0, 0, 0}, {0, 0, 1}, {0, 1, 0}, {0, 1, 1},
                        {1, 0, 0}, {1, 0, 1}, {1, 1, 0}, {1, 1, 1}};
  for (int rank = 0; rank < 8; ++rank) {
    REQUIRE(t.getCoord(rank) == coords[rank]);
    REQUIRE(t.getRankAt(coords[rank]) == rank);
  }
  REQUIRE(t.getRank({{"model", 1}, {"pipe", 1}, {"data", 0}}) == 5);
  // topology.py's get_axis_comm_lists docstring: pipe groups pair the stages at equal (data,
  // model).
  REQUIRE(t.getAxisCommLists("pipe") == Lists{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  REQUIRE(t.getAxisCommLists("data") == Lists{{0, 2}, {1, 3}, {4, 6}, {5, 7}});
  REQUIRE(t.getAxisCommLists("model") == Lists{{0, 1}, {2, 3}, {4, 5}, {6, 7}});
  REQUIRE(t.getAxisCommLists("sequence").empty());  // an axis it lacks: no groups, no error
  // filter_match's docstring example.
  REQUIRE(t.filterMatch({{"pipe", 0}, {"data", 1}}) == std::vector<int>{2, 3});
  REQUIRE(t.filterMatch({{"model", 1}}) == std::vector<int>{1, 3, 5, 7});
  REQUIRE(t.filterMatch({}) == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});
  REQUIRE(t.filterMatch({{"pipe", 2}}).empty());
  // PipelineParallelGrid's ds_model groups: get_axis_list('data', dp).
  REQUIRE(t.getAxisList("data", 1) == std::vector<int>{2, 3, 6, 7});
  REQUIRE(t.pipeParallelSize() == 2);
  REQUIRE(t.modelParallelSize() == 2);
  REQUIRE(t.dataParallelSize() == 2);
  REQUIRE(t.getDim("sequence") == 0);
  // build_p2p_groups: each rank with the next stage's, the last stage wrapping to the first.
  REQUIRE(t.p2pGroups() == Lists{{0, 4}, {1, 5}, {2, 6}, {3, 7}, {4, 0}, {5, 1}, {6, 2}, {7, 3}});
  REQUIRE(t.stageToGlobal(3, 1) == 7);
  REQUIRE(t.stageOf(6) == 1);
  const PipeNeighbours first = t.pipeNeighbours(2);
  REQUIRE(!first.prev);
  REQUIRE(first.next == 6);
  const PipeNeighbours last = t.pipeNeighbours(5);
  REQUIRE(last.prev == 1);
  REQUIRE(!last.next);
  // get_rank_repr names checkpoint files by the axes not omitted (data and pipe by default).
  REQUIRE(t.getRankRepr(3) == "model_01");
  REQUIRE(t.getRankRepr(6, {}) == "pipe_01-data_01-model_00");
}

TEST_CASE("topology: pipe 4 x data 1 x model 2", "[topology]") {
  const PipeModelDataTopology t(/*pipe=*/4, /*model=*/2, /*data=*/1);
  REQUIRE(t.worldSize() == 8);
  REQUIRE(t.getCoord(5) == std::vector<int>{2, 0, 1});  // rank = pipe * 2 + model
  REQUIRE(t.getAxisCommLists("pipe") == Lists{{0, 2, 4, 6}, {1, 3, 5, 7}});
  REQUIRE(t.getAxisCommLists("data") == Lists{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}});
  REQUIRE(t.getAxisCommLists("model") == Lists{{0, 1}, {2, 3}, {4, 5}, {6, 7}});
  REQUIRE(t.p2pGroups() == Lists{{0, 2}, {1, 3}, {2, 4}, {3, 5}, {4, 6}, {5, 7}, {6, 0}, {7, 1}});
  REQUIRE(t.dataParallelSize() == 1);
  const std::vector<std::pair<std::optional<int>, std::optional<int>>> neighbours = {
      {std::nullopt, 2}, {std::nullopt, 3}, {0, 4}, {1, 5}, {2, 6}, {3, 7},
      {4, std::nullopt}, {5, std::nullopt}};
  for (int rank = 0; rank < 8; ++rank) {
    INFO("rank " << rank);
    REQUIRE(t.pipeNeighbours(rank).prev == neighbours[rank].first);
    REQUIRE(t.pipeNeighbours(rank).next == neighbours[rank].second);
  }
  REQUIRE(t.getRankRepr(7) == "model_01");
}

TEST_CASE("topology: pipe 1 x data 4 x model 1 is plain data parallelism", "[topology]") {
  const PipeModelDataTopology t(/*pipe=*/1, /*model=*/1, /*data=*/4);
  REQUIRE(t.getAxisCommLists("data") == Lists{{0, 1, 2, 3}});
  REQUIRE(t.getAxisCommLists("pipe") == Lists{{0}, {1}, {2}, {3}});
  REQUIRE(t.getAxisCommLists("model") == Lists{{0}, {1}, {2}, {3}});
  REQUIRE(t.p2pGroups() == Lists{{0, 0}, {1, 1}, {2, 2}, {3, 3}});
  for (int rank = 0; rank < 4; ++rank) {
    REQUIRE(t.getCoord(rank) == std::vector<int>{0, rank, 0});
    REQUIRE(!t.pipeNeighbours(rank).prev);
    REQUIRE(!t.pipeNeighbours(rank).next);
  }
}

TEST_CASE("topology: pipe 2 x data 3 x model 2 orders each axis's lists as DeepSpeed",
          "[topology]") {
  const PipeModelDataTopology t(/*pipe=*/2, /*model=*/2, /*data=*/3);
  // Lists run over the other axes in axis order, the first slowest: (pipe, model) for data.
  REQUIRE(t.getAxisCommLists("data") == Lists{{0, 2, 4}, {1, 3, 5}, {6, 8, 10}, {7, 9, 11}});
  REQUIRE(t.getAxisCommLists("pipe") == Lists{{0, 6}, {1, 7}, {2, 8}, {3, 9}, {4, 10}, {5, 11}});
  REQUIRE(t.getAxisCommLists("model") == Lists{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}});
}

TEST_CASE("topology: a generic grid, with topology.py's docstring examples", "[topology]") {
  const ProcessTopology xy({"x", "y"}, {2, 3});
  REQUIRE(xy.getRank({{"x", 0}, {"y", 1}}) == 1);
  REQUIRE(xy.getDim("y") == 3);
  REQUIRE(xy.getCoord(1) == std::vector<int>{0, 1});
  REQUIRE(xy.getCoord(1, "y") == 1);
  REQUIRE(xy.getAxisList("x", 0) == std::vector<int>{0, 1, 2});
  REQUIRE(xy.getAxisList("y", 0) == std::vector<int>{0, 3});
  const ProcessTopology ab({"a", "b"}, {2, 2});
  REQUIRE(ab.getRankRepr(3, {}) == "a_01-b_01");
  REQUIRE(ab.getRankRepr(3, {"a"}) == "b_01");
}

TEST_CASE("topology: equals DeepSpeed's enumeration on every shape up to 3 x 3 x 3", "[topology]") {
  for (int pipe = 1; pipe <= 3; ++pipe)
    for (int data = 1; data <= 3; ++data)
      for (int model = 1; model <= 3; ++model) {
        INFO("pipe " << pipe << " data " << data << " model " << model);
        const PipeModelDataTopology t(pipe, model, data);
        const EnumeratedTopology ref({pipe, data, model});
        REQUIRE(t.worldSize() == static_cast<int>(ref.rankOf.size()));
        for (const auto& [coord, rank] : ref.rankOf) {
          REQUIRE(t.getRankAt(coord) == rank);
          REQUIRE(t.getCoord(rank) == coord);
        }
        REQUIRE(t.getAxisCommLists("pipe") == ref.axisCommLists(0));
        REQUIRE(t.getAxisCommLists("data") == ref.axisCommLists(1));
        REQUIRE(t.getAxisCommLists("model") == ref.axisCommLists(2));
        const PipeModelDataTopology viaWorld =
            PipeModelDataTopology::forWorld(pipe * data * model, pipe, model);
        REQUIRE(viaWorld.dataParallelSize() == data);
      }
}

TEST_CASE("topology: impossible shapes and lookups are refused by name", "[topology]") {
  REQUIRE_THROWS_WITH(PipeModelDataTopology(2, 0, 2),
                      Catch::Contains("axis \"model\" has size 0; every axis needs at least 1"));
  REQUIRE_THROWS_WITH(PipeModelDataTopology(-1, 1, 1), Catch::Contains("\"pipe\" has size -1"));
  REQUIRE_THROWS_WITH(ProcessTopology({"x", "x"}, {1, 2}),
                      Catch::Contains("axis \"x\" is named twice"));
  REQUIRE_THROWS_WITH(ProcessTopology({"x"}, {1, 2}), Catch::Contains("1 axes but 2 sizes"));
  REQUIRE_THROWS_WITH(ProcessTopology({}, {}), Catch::Contains("no axes"));
  REQUIRE_THROWS_WITH(ProcessTopology({"x", "y"}, {65536, 65536}), Catch::Contains("does not fit"));
  REQUIRE_THROWS_WITH(PipeModelDataTopology::forWorld(6, 2, 2),
                      Catch::Contains("world size 6 is not a multiple of pipe-parallel size 2 x "
                                      "model-parallel size 2"));
  REQUIRE_THROWS_WITH(PipeModelDataTopology::forWorld(2, 2, 2),
                      Catch::Contains("world size 2 is not a multiple"));
  REQUIRE_THROWS_WITH(PipeModelDataTopology::forWorld(8, 0, 2),
                      Catch::Contains("pipe-parallel size 0: expected >= 1"));
  const PipeModelDataTopology t(2, 2, 2);
  REQUIRE_THROWS_WITH(t.getRank({{"pipe", 0}, {"data", 1}}), Catch::Contains("use filterMatch"));
  REQUIRE_THROWS_WITH(t.getRank({{"pipe", 0}, {"data", 1}, {"tensor", 0}}),
                      Catch::Contains("no axis \"tensor\" (axes: pipe, data, model)"));
  REQUIRE_THROWS_WITH(t.getRank({{"pipe", 0}, {"pipe", 1}, {"data", 0}}),
                      Catch::Contains("names \"pipe\" twice"));
  REQUIRE_THROWS_WITH(t.getRankAt({0, 2, 0}), Catch::Contains("data=2 is outside 0..1"));
  REQUIRE_THROWS_WITH(t.getCoord(8), Catch::Contains("rank 8 is not in a world of 8"));
  REQUIRE_THROWS_WITH(t.filterMatch({{"tensor", 0}}), Catch::Contains("no axis \"tensor\""));
}

TEST_CASE("topology: the batch rules divide by world / (pipe x model), as with an mpu",
          "[topology][batch]") {
  const auto t = PipeModelDataTopology::forWorld(/*world=*/8, /*pipe=*/2, /*model=*/2);
  // micro 4 on each of 2 data-parallel replicas, not on each of 8 ranks.
  REQUIRE(inferBatchSizes(std::nullopt, 4, std::nullopt, t).trainBatchSize == 8);
  REQUIRE(inferBatchSizes(32, 4, std::nullopt, t).gradientAccumulationSteps == 4);
  REQUIRE(inferBatchSizes(32, std::nullopt, 2, t).microBatchPerGpu == 8);
  REQUIRE_THROWS_WITH(inferBatchSizes(10, 4, 1, t), Catch::Contains("10 != 4 * 1 * 2"));
  // Without model or pipe parallelism the data-parallel size is the world, as before.
  const auto plain = PipeModelDataTopology::forWorld(8, 1, 1);
  REQUIRE(inferBatchSizes(std::nullopt, 4, std::nullopt, plain).trainBatchSize == 32);
}
