// Exported environment: prefixes from DeepSpeed's runner.py (EXPORT_ENVS, the Nebula list and the
// CUDA accelerator's "NCCL"), matched by prefix exactly as DeepSpeed does.
#include "launcher/exported_env.h"

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "common/error.h"
#include "common/files.h"

namespace ds::launcher {
namespace {

const char* const kExportPrefixes[] = {
    "MLFLOW", "PYTHON", "MV2", "UCX", "NCCL",
    // deepspeed/nebula/constants.py
    "DLTS_JOB_ID", "DLTS_NUM_WORKER", "NEBULA_PERSISTENT_STORAGE_PATH",
    "NEBULA_PERSISTENT_TIME_INTERVAL", "AML_RUN_ID", "AZUREML_RUN_TOKEN", "AZUREML_WORKSPACE_SCOPE",
    "AZUREML_EXPERIMENT_SCOPE", "AZUREML_RUN_HISTORY_SERVICE_ENDPOINT", "AZUREML_RUN_ID",
    "NEBULA_MEMORY_BUFFER_SIZE", "AZUREML_PARAMETER_ITPJOB_NAME", "FC_TASKROLE_NAME",
    "FC_TASK_INDEX", "MASTER_HOST", "LOCAL_HOST", "AZUREML_BLOB_ACCOUNT_NAME",
    "AZUREML_BLOB_ACCOUNT_KEY"};

std::string strip(const std::string& s) {
  const auto first = s.find_first_not_of(" \t\r\n\f\v");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t\r\n\f\v") - first + 1);
}

bool isVariableName(const std::string& key) {
  const auto letter = [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
  };
  if (key.empty() || !letter(key[0])) return false;
  return std::all_of(key.begin(), key.end(),
                     [&](char c) { return letter(c) || (c >= '0' && c <= '9'); });
}

}  // namespace

void addExport(EnvList& exports, std::string key, std::string value) {
  key = strip(key);
  value = strip(value);
  for (auto& [existing, old] : exports)
    if (existing == key) {
      old = std::move(value);
      return;
    }
  exports.emplace_back(std::move(key), std::move(value));
}

void readEnvFile(const std::string& path, EnvList& exports) {
  std::error_code missing;
  if (!std::filesystem::exists(path, missing)) return;
  // Read as a regular file of bounded size: a FIFO or /dev/zero put there is refused, not read.
  std::istringstream in(readWholeFile(path, "DeepSpeed environment file", size_t{1} << 20));
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    const std::string stripped = strip(line);
    if (stripped.empty() || stripped[0] == '#') continue;
    const auto equals = line.find('=');
    if (equals == std::string::npos)
      throw Error(path + ":" + std::to_string(number) + ": '" + stripped +
                  "' is not KEY=VALUE (blank lines and '#' comments are allowed)");
    const std::string key = strip(line.substr(0, equals));
    if (key.empty()) throw Error(path + ":" + std::to_string(number) + ": empty variable name");
    // The key reaches every node's shell unquoted (export KEY=...): only a plain name is safe.
    if (!isVariableName(key))
      throw Error(path + ":" + std::to_string(number) + ": '" + key.substr(0, 64) +
                  "' is not a variable name (letters, digits and '_', not starting with a digit)");
    addExport(exports, line.substr(0, equals), line.substr(equals + 1));
  }
}

EnvList collectExports(const std::vector<std::string>& environment, const std::string& workDir,
                       const std::string& home, const std::string& envFileName) {
  EnvList exports;
  bool pythonPathSeen = false;
  const bool aisc = std::any_of(environment.begin(), environment.end(), [](const std::string& e) {
    return e.starts_with("AISC_JOB_NAME=");
  });
  for (const std::string& entry : environment) {
    const auto equals = entry.find('=');
    if (equals == std::string::npos) continue;
    std::string key = entry.substr(0, equals), value = entry.substr(equals + 1);
    if (aisc && (key == "NCCL_IB_HCA" || key == "UCX_NET_DEVICES")) continue;
    if (key == "PYTHONPATH") {
      value = workDir + ":" + value;
      pythonPathSeen = true;
    }
    if (std::any_of(std::begin(kExportPrefixes), std::end(kExportPrefixes),
                    [&](const char* prefix) { return key.starts_with(prefix); }))
      addExport(exports, key, value);
  }
  if (!pythonPathSeen) addExport(exports, "PYTHONPATH", workDir);
  if (!home.empty()) readEnvFile(home + "/" + envFileName, exports);
  readEnvFile(workDir + "/" + envFileName, exports);
  return exports;
}

std::string shellQuote(const std::string& value) {
  const bool safe = !value.empty() && std::all_of(value.begin(), value.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) ||
           std::string_view("_@%+=:,./-").find(c) != std::string_view::npos;
  });
  if (safe) return value;
  std::string quoted = "'";
  for (char c : value) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string shellLine(const std::vector<std::string>& argv) {
  std::string line;
  for (const auto& arg : argv) line += (line.empty() ? "" : " ") + shellQuote(arg);
  return line;
}

}  // namespace ds::launcher
