// The layering the build's targets encode, checked on the sources: every #include "..." of every
// folder must name a folder its layer may use. Link order catches an upward call only once code
// calls it; a header-only upward include (a struct, an inline function) would slip through and
// grow into a cycle, so the table is checked here, and checked to have no cycle itself.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

struct Layer {
  std::string folder;               // relative to the source root
  std::vector<std::string> allows;  // include prefixes besides its own folder
};

// Bottom to top. A config struct lives beside its component, so config/ may include exactly those
// headers of the components it configures, and no component includes config/ back.
const std::vector<Layer> kLayers = {
    {"common", {}},
    {"kernels", {"common/"}},
    {"contract", {"common/"}},
    {"proto", {"common/", "contract/"}},  // the wire form of the contract (contract_conversion.h)
    {"runtime/data", {"common/"}},
    {"runtime/checkpoint", {"common/"}},
    {"runtime/elastic", {"common/"}},
    {"runtime/profiler", {"common/"}},
    {"runtime/monitor", {"common/"}},
    {"runtime/offload", {"common/"}},
    {"runtime/comm", {"common/", "kernels/"}},
    {"runtime/parallel", {"common/", "kernels/", "runtime/comm/"}},
    {"runtime/model",
     {"common/", "kernels/", "runtime/comm/", "runtime/parallel/", "runtime/profiler/"}},
    {"runtime/config",
     {"common/", "runtime/data/", "runtime/elastic/", "runtime/monitor/", "runtime/profiler/",
      "runtime/comm/comms_logger_config.h", "runtime/offload/aio_config.h",
      "runtime/model/gpt_config.h", "runtime/parallel/topology.h"}},
    {"runtime/lr", {"common/", "runtime/config/"}},
    {"runtime/precision", {"common/", "runtime/config/"}},
    // The 1-bit optimizers average their compressed momentum over the data group themselves.
    {"runtime/optim", {"common/", "kernels/", "runtime/comm/", "runtime/config/", "runtime/model/"}},
    {"runtime/zero",
     {"common/", "kernels/", "runtime/comm/", "runtime/config/", "runtime/model/",
      "runtime/offload/", "runtime/optim/"}},
    {"runtime/engine",
     {"common/", "kernels/", "runtime/checkpoint/", "runtime/comm/", "runtime/config/",
      "runtime/lr/", "runtime/model/", "runtime/offload/", "runtime/optim/", "runtime/parallel/",
      "runtime/precision/", "runtime/zero/"}},
    // The training loop and its observers: the engine drives it; nothing above is reached.
    {"runtime/train",
     {"common/", "runtime/checkpoint/", "runtime/comm/", "runtime/config/", "runtime/engine/",
      "runtime/model/", "runtime/monitor/"}},
    // ds-launch: planning needs the configs and checkpoints, the coordinator the store, the
    // dry run the rank layout's arithmetic; never the collectives, models or kernels.
    {"launcher",
     {"common/", "contract/", "proto/", "runtime/config/", "runtime/checkpoint/",
      "runtime/comm/store.h", "runtime/comm/memory_store.h", "runtime/parallel/topology.h"}},
    // ds-worker wires jobs from the runtime's parts (the job's accelerator among them) and runs
    // the training loop; the ZeRO stages, optimizers, schedules, offload and monitors stay behind
    // the engine and the loop.
    {"worker",
     {"common/", "contract/", "proto/", "kernels/accelerator.h", "kernels/cpu/kernel_threads.h",
      "kernels/cpu/matmul.h",
      "kernels/cpu/matmul_peak.h", "kernels/cpu/transformer_kernels.h",
      "runtime/checkpoint/checkpoint_files.h", "runtime/comm/", "runtime/config/",
      "runtime/data/", "runtime/engine/", "runtime/model/", "runtime/parallel/",
      "runtime/train/"}},
};

std::string folderOf(const std::string& includePath) {
  const auto slash = includePath.rfind('/');
  return slash == std::string::npos ? "" : includePath.substr(0, slash);
}

bool startsWith(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

// Every quoted include of a project header in the folder's own files (not its subfolders: those
// are layers of their own).
std::vector<std::pair<std::string, std::string>> quotedIncludes(const fs::path& folder) {
  std::vector<std::pair<std::string, std::string>> found;  // (file, included path)
  for (const auto& entry : fs::directory_iterator(folder)) {
    const auto ext = entry.path().extension();
    if (!entry.is_regular_file() || (ext != ".h" && ext != ".cc")) continue;
    std::ifstream in(entry.path());
    std::string line;
    while (std::getline(in, line)) {
      if (!startsWith(line, "#include \"")) continue;
      const auto end = line.find('"', 10);
      if (end != std::string::npos) found.emplace_back(entry.path().string(), line.substr(10, end - 10));
    }
  }
  return found;
}

}  // namespace

TEST_CASE("layering: every folder includes only the layers below it") {
  const fs::path root = DS_SOURCE_DIR;
  size_t checked = 0;
  for (const Layer& layer : kLayers) {
    REQUIRE(fs::is_directory(root / layer.folder));
    for (auto [file, included] : quotedIncludes(root / layer.folder)) {
      ++checked;
      // A bare name is a generated header: of a .proto in the folder itself (the tensorboard
      // monitor's events), else of proto/'s, found through the proto targets.
      if (included.find('/') == std::string::npos) {
        const auto stem = included.substr(0, included.find(".pb.h"));
        const bool own = fs::exists(root / layer.folder / (stem + ".proto"));
        included = (own ? layer.folder : std::string("proto")) + "/" + included;
      }
      if (startsWith(included, layer.folder + "/")) continue;
      bool allowed = false;
      for (const auto& prefix : layer.allows) allowed = allowed || startsWith(included, prefix);
      INFO(file << " includes \"" << included << "\", which layer " << layer.folder
                << " may not use (test/test_layering.cc has the table)");
      CHECK(allowed);
    }
  }
  CHECK(checked > 500);  // the walk really read the tree
}

TEST_CASE("layering: the table itself has no cycle") {
  // Folder-level edges of the table; a layer may name a single header of another folder, which
  // still makes that folder a dependency.
  std::map<std::string, std::set<std::string>> edges;
  for (const Layer& layer : kLayers)
    for (const auto& prefix : layer.allows) {
      std::string target = prefix.back() == '/' ? prefix.substr(0, prefix.size() - 1) : folderOf(prefix);
      if (target == "runtime") continue;  // the worker's blanket allowance: it is on top
      edges[layer.folder].insert(target);
    }
  // Every edge must point to a layer listed earlier (bottom to top): that order is a topological
  // order, so there is no cycle.
  std::map<std::string, size_t> position;
  for (size_t i = 0; i < kLayers.size(); ++i) position[kLayers[i].folder] = i;
  for (const auto& [from, targets] : edges)
    for (const auto& to : targets) {
      if (!position.count(to)) continue;  // a folder outside the table
      INFO(from << " -> " << to);
      CHECK(position.at(to) < position.at(from));
    }
}
