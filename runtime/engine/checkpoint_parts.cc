#include "runtime/engine/checkpoint_parts.h"

#include <filesystem>
#include <map>

#include "common/error.h"
#include "runtime/checkpoint/checkpoint_files.h"

namespace ds::runtime {

namespace fs = std::filesystem;

std::vector<CheckpointPart> readCheckpointParts(const std::string& root) {
  std::vector<CheckpointPart> parts;
  {
    CheckpointPart top{root, (fs::path(root) / "manifest.json").string(), {}, {}};
    top.manifest = readManifest(top.manifestPath);
    const ManifestGrid grid = top.manifest.grid.value_or(ManifestGrid{});
    if (grid.stage != 0 || grid.modelRank != 0)
      throw Error(top.manifestPath + ": grid: the top part must be stage 0, model rank 0");
    parts.push_back(std::move(top));
    for (int64_t stage = 0; stage < grid.pipe; ++stage)
      for (int64_t modelRank = 0; modelRank < grid.model; ++modelRank) {
        if (stage == 0 && modelRank == 0) continue;
        CheckpointPart part;
        part.dir = gridCheckpointDir(root, stage, modelRank);
        part.manifestPath = (fs::path(part.dir) / "manifest.json").string();
        part.manifest = readManifest(part.manifestPath);
        const std::optional<ManifestGrid>& g = part.manifest.grid;
        if (!g || g->pipe != grid.pipe || g->model != grid.model || g->stage != stage ||
            g->modelRank != modelRank)
          throw Error(part.manifestPath + ": grid: expected stage " + std::to_string(stage) +
                      " and model rank " + std::to_string(modelRank) + " of a pipe " +
                      std::to_string(grid.pipe) + " x model " + std::to_string(grid.model) +
                      " checkpoint");
        // Checked before anything is loaded: a part copied from another save (an earlier step,
        // another run, another model) fits the grid and the tensor table just as well.
        if (const std::string d = partDifference(parts.front().manifest, part.manifest);
            !d.empty())
          throw Error(part.manifestPath + ": this part is not from the save of " +
                      parts.front().manifestPath + " (" + d +
                      "); every part of a checkpoint must come from one save: restore this "
                      "part from it or load another tag");
        parts.push_back(std::move(part));
      }
  }
  // A model with experts: each model part's experts, one part per expert-parallel rank beside it.
  const bool experts = parts.front().manifest.experts.has_value();
  const int64_t ep = parts.front().manifest.experts.value_or(ManifestExperts{}).parallel;
  for (size_t modelParts = parts.size(), p = 0; experts && p < modelParts; ++p)
    for (int64_t e = 0; e < ep; ++e) {
      CheckpointPart part;
      part.dir = expertCheckpointDir(parts[p].dir, e);
      part.manifestPath = (fs::path(part.dir) / "manifest.json").string();
      part.manifest = readManifest(part.manifestPath);
      const ManifestExperts x = part.manifest.experts.value_or(ManifestExperts{});
      const ManifestGrid g = part.manifest.grid.value_or(ManifestGrid{}),
                         model = parts[p].manifest.grid.value_or(ManifestGrid{});
      if (x.parallel != ep || x.rank != e || g.pipe != model.pipe || g.model != model.model ||
          g.stage != model.stage || g.modelRank != model.modelRank)
        throw Error(part.manifestPath +
                    ": experts: expected the experts' part of expert-parallel "
                    "rank " +
                    std::to_string(e) + " of " + std::to_string(ep) + " beside " +
                    parts[p].manifestPath);
      if (const std::string d = partDifference(parts.front().manifest, part.manifest); !d.empty())
        throw Error(part.manifestPath + ": this part is not from the save of " +
                    parts.front().manifestPath + " (" + d +
                    "); every part of a checkpoint must come from one save: restore this "
                    "part from it or load another tag");
      parts.push_back(std::move(part));
    }
  for (CheckpointPart& part : parts) {
    size_t offset = 0;
    for (const ManifestTensor& t : part.manifest.tensors) {
      ParamSpec spec;
      spec.name = t.name;
      spec.numel = t.numel;
      spec.offset = offset;
      offset += t.numel;
      if (t.slice) spec.slice = *t.slice;
      part.specs.push_back(std::move(spec));
    }
  }
  return parts;
}

std::vector<std::vector<TensorSource>> tensorSources(const std::vector<CheckpointPart>& parts,
                                                     const std::vector<ParamSpec>& specs) {
  const std::string& manifestPath = parts.front().manifestPath;
  std::vector<std::vector<TensorSource>> sources(specs.size());
  std::map<std::string, std::vector<TensorSource>> byName;
  for (size_t p = 0; p < parts.size(); ++p)
    for (size_t u = 0; u < parts[p].specs.size(); ++u)
      byName[parts[p].specs[u].name].push_back({p, u});
  for (size_t t = 0; t < specs.size(); ++t) {
    const auto it = byName.find(specs[t].name);
    if (it == byName.end())
      throw Error(manifestPath + ": the checkpoint has no tensor \"" + specs[t].name +
                  "\" (saved from another model?)");
    const int64_t stage =
        parts[it->second.front().part].manifest.grid.value_or(ManifestGrid{}).stage;
    for (const TensorSource& source : it->second) {
      const ParamSpec& was = parts[source.part].specs[source.tensor];
      if (parts[source.part].manifest.grid.value_or(ManifestGrid{}).stage != stage) continue;
      if (was.fullSlice().fullNumel != specs[t].fullSlice().fullNumel)
        throw Error(parts[source.part].manifestPath + ": tensor \"" + was.name + "\" has " +
                    std::to_string(was.fullSlice().fullNumel) + " elements in full, this model " +
                    std::to_string(specs[t].fullSlice().fullNumel));
      sources[t].push_back(source);
      if (was.slice.fullNumel == 0) break;  // a whole copy has everything
    }
  }
  return sources;
}

}  // namespace ds::runtime
