// The CUDA kernel test's results: one line per check as it finishes, the tolerance each was held
// to, and the whole as JSON for scripts/gpu-check's summary.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace ds::test {

struct Result {
  std::string name;
  bool passed;
  double error, tolerance;
  std::string note;
};

inline std::string jsonEscaped(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    out += c;
  }
  return out;
}

class Report {
 public:
  void add(Result r) {
    std::printf("%s  %-52s error %.3g (tolerance %.3g)%s%s\n", r.passed ? "PASS" : "FAIL",
                r.name.c_str(), r.error, r.tolerance, r.note.empty() ? "" : "  ", r.note.c_str());
    std::fflush(stdout);
    results_.push_back(std::move(r));
  }
  // max |gpu - ref| / (|ref| + floor), floor = 1% of the largest |ref|: relative where values
  // are large, absolute against the array's scale near zero (where sums cancel).
  void close(const std::string& name, const std::vector<float>& gpu, const std::vector<float>& ref,
             double tolerance) {
    double scale = 0.0, error = 0.0;
    for (float r : ref) scale = std::max(scale, std::fabs(static_cast<double>(r)));
    const double floor = scale > 0.0 ? 0.01 * scale : 1e-30;
    size_t bitwise = 0;
    bool nan = gpu.size() != ref.size();
    for (size_t i = 0; i < gpu.size() && i < ref.size(); ++i) {
      const bool same = gpu[i] == ref[i] || (std::isnan(gpu[i]) && std::isnan(ref[i]));  // inf, NaN
      const double d = same ? 0.0 : std::fabs(static_cast<double>(gpu[i]) - ref[i]);
      nan = nan || std::isnan(d);
      error = std::max(error, d / (std::fabs(static_cast<double>(ref[i])) + floor));
      bitwise += std::memcmp(&gpu[i], &ref[i], sizeof(float)) == 0;
    }
    add({name, !nan && error <= tolerance, nan ? NAN : error, tolerance,
         std::to_string(bitwise) + "/" + std::to_string(ref.size()) + " bitwise"});
  }
  void expect(const std::string& name, bool ok, const std::string& note) {
    add({name, ok, ok ? 0.0 : 1.0, 0.0, note});
  }
  int failures() const {
    int n = 0;
    for (const Result& r : results_) n += !r.passed;
    return n;
  }
  void writeJson(const std::string& path, const std::string& device, double seconds) const {
    std::ofstream out(path);
    out << "{\"device\": \"" << jsonEscaped(device) << "\", \"checks\": " << results_.size()
        << ", \"failed\": " << failures() << ", \"seconds\": " << seconds << ", \"results\": [";
    for (size_t i = 0; i < results_.size(); ++i) {
      const Result& r = results_[i];
      out << (i ? ",\n  " : "\n  ") << "{\"name\": \"" << jsonEscaped(r.name)
          << "\", \"passed\": " << (r.passed ? "true" : "false")
          << ", \"error\": " << (std::isfinite(r.error) ? r.error : -1.0)
          << ", \"tolerance\": " << r.tolerance << ", \"note\": \"" << jsonEscaped(r.note) << "\"}";
    }
    out << "]}\n";
  }

 private:
  std::vector<Result> results_;
};

}  // namespace ds::test
