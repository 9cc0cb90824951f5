// NeoX's attention-config: the list that names each layer's attention kind, in NeoX's forms
// ([[["flash"], 4]], [[["global", "flash"], "all"]] or an already expanded list), expanded and
// checked as NeoX's arguments.py does. Only the dense kinds run here; the others are refused.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace ds::runtime {

// One attention kind per layer. Throws ds::Error naming attention-config when the list is
// malformed, does not cover num-layers exactly, names a kind NeoX does not know, or names a kind
// other than global and flash (with the layers that have it).
std::vector<std::string> expandAttentionConfig(const nlohmann::json& value, int numLayers);

// NeoX applies sliding-window-width only inside flash attention (its global attention ignores
// it): a window with any global layer is refused, with the layers. Width < 0: no window.
void checkSlidingWindow(const std::vector<std::string>& kinds, int slidingWindowWidth);

}  // namespace ds::runtime
