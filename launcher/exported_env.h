// The environment ds-launch forwards to remote nodes, as DeepSpeed's runner builds it
// (DEEPSPEED-SEMANTICS.md section 8): PYTHONPATH with the working directory first, variables
// whose names start with DeepSpeed's prefixes, then the .deepspeed_env files (home, then the
// working directory; later files win, a key keeps its first position).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace ds::launcher {

using EnvList = std::vector<std::pair<std::string, std::string>>;

// Adds or replaces `key`, keeping its first position (DeepSpeed's add_export).
void addExport(EnvList& exports, std::string key, std::string value);

// Reads one .deepspeed_env file: KEY=VALUE lines, blank lines and '#' comments allowed; a line
// without '=' is an error "PATH:LINE: ...". Missing file: nothing added.
void readEnvFile(const std::string& path, EnvList& exports);

// `environment` is KEY=VALUE strings (environ order); `home` and `workDir` locate the files;
// `envFileName` is $DS_ENV_FILE or ".deepspeed_env".
EnvList collectExports(const std::vector<std::string>& environment, const std::string& workDir,
                       const std::string& home, const std::string& envFileName);

// The value quoted for a POSIX shell: unchanged when it only has safe characters, else single
// quotes with embedded quotes escaped.
std::string shellQuote(const std::string& value);
// A command as a POSIX shell line: each argument shellQuote'd, separated by spaces.
std::string shellLine(const std::vector<std::string>& argv);

}  // namespace ds::launcher
