// formatFlopsProfile: DeepSpeed's profile text (flops = 2 x MACs; backward flops counted as twice
// the forward's, as DeepSpeed does).
#include "runtime/profiler/flops_profiler.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

namespace ds::runtime {
namespace {

std::string fixed(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

std::string flopsRate(double flops, double seconds) {
  return seconds > 0 ? withUnit(flops / seconds, "FLOPS") : "- FLOPS";
}

std::string percent(double part, double whole) {
  return fixed(whole > 0 ? 100.0 * part / whole : 0.0) + "%";
}

}  // namespace

std::string withUnit(double value, const std::string& suffix) {
  const char* units[] = {"T", "G", "M", "K"};
  const double scales[] = {1e12, 1e9, 1e6, 1e3};
  for (int i = 0; i < 4; ++i)
    if (value >= scales[i]) return fixed(value / scales[i]) + " " + units[i] + suffix;
  // Below a thousand DeepSpeed prints Python's round(x, 2): "512", "0", "0.5".
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f", value);
  std::string text = buf;
  while (text.back() == '0') text.pop_back();
  if (text.back() == '.') text.pop_back();
  return suffix.empty() ? text : text + " " + suffix;
}

std::string latencyText(double seconds) {
  if (seconds >= 1.0) return fixed(seconds) + " s";
  if (seconds >= 1e-3) return fixed(seconds * 1e3) + " ms";
  return fixed(seconds * 1e6) + " us";
}

namespace {

// The summary: the step's figures, DeepSpeed's labels padded to one column.
void writeSummary(std::ostream& out, const ModuleProfile& root, const ProfileSummary& s) {
  const double fwdFlops = 2.0 * root.macs;
  auto line = [&](const std::string& label, const std::string& value) {
    std::string l = label;
    l.resize(std::max<size_t>(l.size() + 1, 62), ' ');
    out << l << value << '\n';
  };
  out << "\n-------------------------- DeepSpeed Flops Profiler --------------------------\n";
  out << "Profile Summary at step " << s.step << ":\n";
  out << "Notations:\n"
         "data parallel size (dp_size), model parallel size(mp_size),\n"
         "number of parameters (params), number of multiply-accumulate operations(MACs),\n"
         "number of floating-point operations (flops), floating-point operations per second "
         "(FLOPS),\n"
         "fwd latency (forward propagation latency), bwd latency (backward propagation "
         "latency),\n"
         "step (weights update latency), iter latency (sum of fwd, bwd and step latency)\n\n";
  const double iter = s.forwardSeconds + s.backwardSeconds + s.stepSeconds;
  line("world size:", std::to_string(s.worldSize));
  line("data parallel size:", std::to_string(s.worldSize));
  line("model parallel size:", "1");
  line("batch size per GPU:", std::to_string(s.batchPerRank));
  line("params per gpu:", withUnit(root.params));
  line("params of model = params per GPU * mp_size:", withUnit(root.params));
  line("fwd MACs per GPU:", withUnit(root.macs, "MACs"));
  line("fwd flops per GPU:", withUnit(fwdFlops));
  line("fwd flops of model = fwd flops per GPU * mp_size:", withUnit(fwdFlops));
  line("fwd latency:", latencyText(s.forwardSeconds));
  line("fwd FLOPS per GPU = fwd flops per GPU / fwd latency:", flopsRate(fwdFlops, s.forwardSeconds));
  line("bwd latency:", latencyText(s.backwardSeconds));
  line("bwd FLOPS per GPU = 2 * fwd flops per GPU / bwd latency:",
       flopsRate(2 * fwdFlops, s.backwardSeconds));
  line("fwd+bwd FLOPS per GPU = 3 * fwd flops per GPU / (fwd+bwd latency):",
       flopsRate(3 * fwdFlops, s.forwardSeconds + s.backwardSeconds));
  line("step latency:", latencyText(s.stepSeconds));
  line("iter latency:", latencyText(iter));
  line("samples/second:", fixed(iter > 0 ? static_cast<double>(s.trainBatchSize) / iter : 0.0));
}

// The aggregated profile: per depth, the top modules by params, MACs and latency.
void writeAggregated(std::ostream& out, const std::vector<ModuleProfile>& modules,
                     const FlopsProfilerConfig& config) {
  int maxDepth = 0;
  for (const auto& m : modules) maxDepth = std::max(maxDepth, m.depth);
  const int depths = config.moduleDepth < 0 ? maxDepth : static_cast<int>(std::min<int64_t>(config.moduleDepth, maxDepth));
  out << "\n----------------------------- Aggregated Profile per GPU -----------------------------\n";
  out << "Top " << config.topModules
      << " modules in terms of params, MACs or fwd latency at different model depths:\n";
  for (int d = 0; d <= depths; ++d) {
    // Modules of one depth aggregated by type, as DeepSpeed groups them by class name.
    std::map<std::string, ModuleProfile> byType;
    for (const auto& m : modules) {
      if (m.depth != d) continue;
      ModuleProfile& a = byType[m.type];
      a.type = m.type;
      a.params += m.params;
      a.macs += m.macs;
      a.forwardSeconds += m.forwardSeconds;
    }
    std::vector<ModuleProfile> v;
    for (auto& [type, p] : byType) v.push_back(p);
    auto top = [&](auto key, auto text) {
      std::sort(v.begin(), v.end(), [&](const auto& a, const auto& b) { return key(a) > key(b); });
      std::string s = "{";
      for (size_t i = 0; i < v.size() && i < static_cast<size_t>(config.topModules); ++i)
        s += (i ? ", '" : "'") + v[i].type + "': '" + text(v[i]) + "'";
      return s + "}";
    };
    out << "depth " << d << ":\n";
    out << "    params      - "
        << top([](const auto& m) { return m.params; }, [](const auto& m) { return withUnit(m.params); })
        << '\n';
    out << "    MACs        - "
        << top([](const auto& m) { return m.macs; },
               [](const auto& m) { return withUnit(m.macs, "MACs"); })
        << '\n';
    out << "    fwd latency - "
        << top([](const auto& m) { return m.forwardSeconds; },
               [](const auto& m) { return latencyText(m.forwardSeconds); })
        << '\n';
  }
}

// The detailed profile: the module tree, each module's share of the root's figures.
void writeDetailed(std::ostream& out, const std::vector<ModuleProfile>& modules,
                   const FlopsProfilerConfig& config) {
  const ModuleProfile& root = modules.front();
  out << "\n------------------------------ Detailed Profile per GPU "
         "------------------------------\n";
  out << "Each module profile is listed after its name in the following order:\n"
         "params, percentage of total params, MACs, percentage of total MACs, fwd latency, "
         "percentage of total fwd latency, fwd FLOPS\n\n";
  std::vector<std::vector<int>> children(modules.size());
  for (size_t i = 1; i < modules.size(); ++i)
    children[modules[i].parent].push_back(static_cast<int>(i));
  auto print = [&](auto&& self, int i) -> void {
    const ModuleProfile& m = modules[i];
    if (config.moduleDepth >= 0 && m.depth > config.moduleDepth) return;
    const std::string indent(2 * m.depth, ' ');
    const std::string leaf =
        m.name.substr(m.name.rfind('.') == std::string::npos ? 0 : m.name.rfind('.') + 1);
    out << indent << (m.depth == 0 ? "" : "(" + leaf + "): ") << m.type << "(\n";
    out << indent << "  " << withUnit(m.params) << ", " << percent(m.params, root.params)
        << " Params, " << withUnit(m.macs, "MACs") << ", " << percent(m.macs, root.macs)
        << " MACs, " << latencyText(m.forwardSeconds) << ", "
        << percent(m.forwardSeconds, root.forwardSeconds) << " latency, "
        << flopsRate(2 * m.macs, m.forwardSeconds) << ",\n";
    for (int c : children[i]) self(self, c);
    out << indent << ")\n";
  };
  print(print, 0);
}

}  // namespace

std::string formatFlopsProfile(const std::vector<ModuleProfile>& modules, const ProfileSummary& s,
                               const FlopsProfilerConfig& config) {
  std::ostringstream out;
  writeSummary(out, modules.front(), s);
  writeAggregated(out, modules, config);
  if (config.detailed) writeDetailed(out, modules, config);
  out << "------------------------------------------------------------------------------\n";
  return out.str();
}

}  // namespace ds::runtime
