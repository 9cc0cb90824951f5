// DeepSpeed's comms_logger block as typed values: what CommsLogger records and prints. Parsed by
// runtime/config/ds_config.cc; kept here, beside the logger, so comm/ never includes config/.
#pragma once

#include <string>
#include <vector>

namespace ds::runtime {

// DeepSpeed's comms_logger block.
struct CommsLoggerConfig {
  bool enabled = false;
  bool verbose = false;  // print every op as it happens
  bool profAll = true;   // false: only the ops in profOps
  bool debug = false;    // accepted; there is no Python caller to append
  std::vector<std::string> profOps;
};

}  // namespace ds::runtime
