// world_info: the node -> slot-ids map that ds-launch hands to every node agent on its command
// line, encoded byte for byte as DeepSpeed's runner does (json.dumps defaults, URL-safe base64
// with padding), so `--world_info` values are interchangeable with DeepSpeed's launch.py.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace ds {

using WorldInfo = std::vector<std::pair<std::string, std::vector<int>>>;  // node order = node rank

std::string encodeWorldInfo(const WorldInfo& world);
// Throws ds::Error naming what is wrong with the text.
WorldInfo decodeWorldInfo(const std::string& base64);

}  // namespace ds
