// The GPT's float64 PyTorch reference (test/reference/gpt_reference.py) run from a plain program:
// writes the reference's spec.json by hand (the GPU machine has no JSON library) and params.bin
// into a scratch folder, runs it through popen and reads back its loss and every gradient. Dense
// models of one rank only: MoE layers and their random draws are not written (test_gpt_model's
// runTorch covers them on the CPU).
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "runtime/model/gpt.h"

namespace ds::test {

struct TorchReference {
  double loss = 0.0;
  std::vector<float> grads;  // flat, in the model's parameter order and offsets
  std::string torch;         // the version the reference ran with
};

// A fresh folder under TMPDIR (or /tmp), removed with everything in it when this goes, also when
// a check throws.
class ScratchFolder {
 public:
  explicit ScratchFolder(const std::string& name) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/" + name + "-XXXXXX";
    if (!mkdtemp(pattern.data()))
      throw Error("cannot create a scratch folder " + pattern + " (set TMPDIR to a writable one)");
    path_ = pattern;
  }
  ScratchFolder(const ScratchFolder&) = delete;
  ScratchFolder& operator=(const ScratchFolder&) = delete;
  ~ScratchFolder() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

namespace torch_reference {

inline std::string number(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", v);  // round-trips, as nlohmann's dump does
  return text;
}

inline std::string quoted(const std::string& s) { return "\"" + s + "\""; }

template <class T>
std::string array(const std::vector<T>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(values[i]);
  }
  return out + "]";
}

inline std::string boolean(bool b) { return b ? "true" : "false"; }

// The keys test_gpt_model.cc's runTorch writes for a dense model (gpt_reference.py reads them).
inline std::string specJson(const runtime::Gpt& model, const runtime::Batch& batch) {
  const runtime::GptConfig& c = model.config();
  if (c.moe.enabled()) throw Error("torch reference: MoE layers are not written here");
  std::ostringstream s;
  s << "{\"config\": {\"hidden\": " << c.hiddenSize << ", \"heads\": " << c.numAttentionHeads
    << ", \"layers\": " << c.numLayers << ", \"norm\": " << quoted(runtime::normName(c.norm))
    << ", \"layernorm_eps\": " << number(c.layernormEpsilon)
    << ", \"rms_eps\": " << number(c.rmsNormEpsilon)
    << ", \"scalenorm_eps\": " << number(c.scalenormEpsilon) << ", \"kv_heads\": " << c.kvHeads()
    << ", \"pos_emb\": " << quoted(runtime::positionEmbeddingName(c.posEmb))
    << ", \"rotary_dim\": " << c.rotaryDim() << ", \"rotary_base\": " << number(c.rotaryEmbBase)
    << ", \"activation\": " << quoted(runtime::activationName(c.activation))
    << ", \"gptj_residual\": " << boolean(c.gptjResidual)
    << ", \"gptj_tied\": " << boolean(c.gptjTied) << ", \"qk_norm\": " << boolean(c.qkNorm)
    << ", \"tied\": " << boolean(c.weightTying);
  if (c.slidingWindowWidth >= 0) s << ", \"sliding_window\": " << c.slidingWindowWidth;
  s << "},\n\"parameters\": [";
  const auto& specs = model.parameters();
  for (size_t i = 0; i < specs.size(); ++i)
    s << (i ? ",\n" : "\n") << "{\"name\": " << quoted(specs[i].name)
      << ", \"shape\": " << array(specs[i].shape) << ", \"offset\": " << specs[i].offset
      << ", \"numel\": " << specs[i].numel << "}";
  s << "],\n\"samples\": " << batch.size << ", \"seq\": " << batch.inputIds.size() / batch.size
    << ",\n\"input_ids\": " << array(batch.inputIds)
    << ",\n\"target_ids\": " << array(batch.targetIds) << "}\n";
  return s.str();
}

inline std::string readAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace torch_reference

// Whether `python` imports torch (the reference's one dependency).
inline bool torchImports(const std::string& python) {
  return std::system((python + " -c 'import torch' >/dev/null 2>&1").c_str()) == 0;
}

// The reference's loss and gradients for `params` (host memory, the model's parameterCount())
// on `batch`: `python script spec.json params.bin grads.bin`. Throws ds::Error with the command
// and the reference's stderr when it fails.
inline TorchReference runTorchReference(const std::string& python, const std::string& script,
                                        const runtime::Gpt& model, const std::vector<float>& params,
                                        const runtime::Batch& batch) {
  using torch_reference::readAll;
  const ScratchFolder dir("ds-gpt-device-check");
  std::ofstream(dir.file("spec.json")) << torch_reference::specJson(model, batch);
  std::ofstream(dir.file("params.bin"), std::ios::binary)
      .write(reinterpret_cast<const char*>(params.data()),
             static_cast<std::streamsize>(params.size() * sizeof(float)));
  // The folder comes from mkdtemp (no quotes in it); the interpreter may carry its own options.
  const std::string cmd = python + " '" + script + "' '" + dir.file("spec.json") + "' '" +
                          dir.file("params.bin") + "' '" + dir.file("grads.bin") + "' 2>'" +
                          dir.file("err") + "'";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) throw Error("torch reference: cannot run " + cmd);
  std::string out;
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) out.append(buffer, n);
  const int status = pclose(pipe);
  if (status != 0)
    throw Error("torch reference failed (" +
                (WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status))
                                   : "wait status " + std::to_string(status)) +
                "): " + cmd + "\n" + readAll(dir.file("err")));
  TorchReference r;
  // It prints one line: {"loss": L, "torch": "VERSION"}.
  const size_t loss = out.find("\"loss\":"), torch = out.find("\"torch\": \"");
  if (loss == std::string::npos) throw Error("torch reference printed no loss: " + out);
  r.loss = std::strtod(out.c_str() + loss + 7, nullptr);
  if (torch != std::string::npos) {
    const size_t begin = torch + 10;
    r.torch = out.substr(begin, out.find('"', begin) - begin);
  }
  const std::string grads = readAll(dir.file("grads.bin"));
  if (grads.size() != params.size() * sizeof(float))
    throw Error("torch reference wrote " + std::to_string(grads.size()) + " bytes of gradients, " +
                "expected " + std::to_string(params.size() * sizeof(float)));
  r.grads.resize(params.size());
  std::copy(grads.begin(), grads.end(), reinterpret_cast<char*>(r.grads.data()));
  return r;
}

}  // namespace ds::test
