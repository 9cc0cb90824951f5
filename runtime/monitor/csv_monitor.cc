// CsvMonitor: appends rows to one file per event name; the header goes in when this monitor first
// writes a file (as DeepSpeed does, so a resumed job appends a second header, like DeepSpeed's).
#include "runtime/monitor/csv_monitor.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/error.h"

namespace ds::runtime {

std::string pythonFloat(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  // The shortest round-trip digits, then Python's layout: positional for 1e-4 <= |v| < 1e16,
  // otherwise d.ddde+XX with at least two exponent digits.
  char buffer[64];
  const auto [end, ec] =
      std::to_chars(buffer, buffer + sizeof(buffer), value, std::chars_format::scientific);
  const std::string sci(buffer, end);  // "-1.2345e-05"
  const size_t e = sci.find('e');
  const bool negative = sci[0] == '-';
  std::string digits;
  for (size_t i = negative ? 1 : 0; i < e; ++i)
    if (sci[i] != '.') digits += sci[i];
  const int exponent = std::stoi(sci.substr(e + 1));
  std::string out = negative ? "-" : "";
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) {
      out += "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
    } else if (static_cast<size_t>(exponent + 1) >= digits.size()) {
      out += digits + std::string(static_cast<size_t>(exponent + 1) - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, static_cast<size_t>(exponent + 1)) + "." +
             digits.substr(static_cast<size_t>(exponent + 1));
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char exp[16];
  std::snprintf(exp, sizeof(exp), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out + exp;
}

CsvMonitor::CsvMonitor(const CsvMonitorConfig& config) {
  dir_ = (std::filesystem::path(config.outputPath) / config.jobName).string();
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) throw Error("csv_monitor: cannot create " + dir_ + ": " + ec.message());
}

void CsvMonitor::write(const std::vector<MonitorEvent>& events) {
  for (const MonitorEvent& e : events) {
    std::string file = e.name;
    for (char& c : file)
      if (c == '/' || c == ' ') c = '_';
    const std::string path = dir_ + "/" + file + ".csv";
    std::ofstream out(path, std::ios::app | std::ios::binary);
    if (!out) throw Error("csv_monitor: cannot write " + path);
    if (started_.insert(file).second)
      out << "step," << e.name.substr(e.name.rfind('/') + 1) << "\r\n";
    out << e.step << ',' << pythonFloat(e.value) << "\r\n";
    if (!out) throw Error("csv_monitor: cannot write " + path);
  }
}

}  // namespace ds::runtime
