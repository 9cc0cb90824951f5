// DeepSpeed's layer partitioning (runtime/utils.py partition_uniform / partition_balanced and
// pipe/module.py _partition_layers), written from their behaviour: same boundaries, same ties.
#include "runtime/parallel/layer_partition.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <regex>

#include "common/error.h"

namespace ds::runtime {

std::vector<int> partitionUniform(int numItems, int numParts) {
  if (numParts < 1) throw Error("partitionUniform: " + std::to_string(numParts) + " parts");
  std::vector<int> parts(static_cast<size_t>(numParts) + 1);
  if (numItems <= numParts) {
    for (int p = 0; p <= numParts; ++p) parts[p] = std::min(p, numItems);
    return parts;
  }
  // The first `residual` parts take one item more than the others.
  const int chunk = numItems / numParts;
  const int residual = numItems - chunk * numParts;
  for (int p = 0; p <= numParts; ++p) parts[p] = p * chunk + std::min(p, residual);
  return parts;
}

std::vector<int> partitionBalanced(const std::vector<std::int64_t>& weights, int numParts) {
  const int n = static_cast<int>(weights.size());
  const int m = numParts;
  if (m < 1) throw Error("partitionBalanced: " + std::to_string(m) + " parts");
  if (n <= m) return partitionUniform(n, m);

  std::vector<std::int64_t> prefix(n + 1, 0);
  for (int i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + weights[i];

  // cell(i, j): the chosen split of the first i items into j parts, as its heaviest and lightest
  // part and the cut before its last part. DeepSpeed seeds (0, 0) with max 0 and min +inf.
  struct Cell {
    std::int64_t max = 0;
    std::int64_t min = std::numeric_limits<std::int64_t>::max();
    int cut = 0;
  };
  std::vector<std::vector<Cell>> cell(n + 1, std::vector<Cell>(m + 1));
  for (int i = 1; i <= n; ++i) {
    for (int j = 1; j <= std::min(i, m); ++j) {
      // Only cuts after a real split of the first k items into j-1 parts count: the others have
      // infinite cost in DeepSpeed and lose to any real one, which always exists.
      const int lastCut = j == 1 ? 0 : i - 1;
      std::int64_t best = std::numeric_limits<std::int64_t>::max();
      for (int k = j - 1; k <= lastCut; ++k) {
        const std::int64_t last = prefix[i] - prefix[k];
        const std::int64_t hi = std::max(cell[k][j - 1].max, last);
        const std::int64_t lo = std::min(cell[k][j - 1].min, last);
        if (hi - lo <= best) {  // `<=`: on a tie the later cut wins, as DeepSpeed's `>=`
          best = hi - lo;
          cell[i][j] = {hi, lo, k};
        }
      }
    }
  }
  std::vector<int> parts(static_cast<size_t>(m) + 1);
  parts[m] = n;
  for (int j = m; j >= 1; --j) parts[j - 1] = cell[parts[j]][j].cut;
  return parts;
}

namespace {

std::string lowered(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::vector<int> partitionLayers(const std::vector<PipeLayer>& layers, int numStages,
                                 std::string_view method, std::string_view key) {
  const std::string where(key);
  if (numStages < 1)
    throw Error(where + ": need at least one pipeline stage, got " + std::to_string(numStages));
  const std::string name = lowered(method);
  if (name == "uniform") return partitionUniform(static_cast<int>(layers.size()), numStages);
  if (name == "parameters") {
    std::vector<std::int64_t> counts;
    for (const auto& layer : layers) counts.push_back(layer.paramCount);
    return partitionBalanced(counts, numStages);
  }
  if (name.rfind("type:", 0) == 0) {
    // DeepSpeed's method.split(':')[1]: a second ':' ends the pattern.
    const std::string rest = name.substr(5);
    const std::string pattern = rest.substr(0, rest.find(':'));
    std::regex re;
    try {
      re = std::regex(pattern, std::regex::ECMAScript | std::regex::icase);
    } catch (const std::regex_error& e) {
      throw Error(where + ": \"" + std::string(method) + "\": \"" + pattern +
                  "\" is not a valid regular expression (" + e.what() + ")");
    }
    std::vector<std::int64_t> weights(layers.size(), 0);
    bool any = false;
    for (size_t i = 0; i < layers.size(); ++i) {
      if (layers[i].typeName.empty() || !std::regex_search(layers[i].typeName, re)) continue;
      weights[i] = 1;
      any = true;
    }
    if (!any)
      throw Error(where + ": \"" + std::string(method) +
                  "\" matches no layer type; layer types "
                  "are the class names of the pipeline's layers (e.g. \"type:transformer\")");
    return partitionBalanced(weights, numStages);
  }
  throw Error(where + ": partitioning method \"" + std::string(method) +
              "\" is not implemented; expected \"parameters\", \"uniform\" or \"type:REGEX\"");
}

}  // namespace ds::runtime
