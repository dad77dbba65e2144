#include "core/host_load.hpp"

#include <fstream>
#include <sstream>
#include <vector>

namespace dptwin {

CpuTimes parse_cpu_times(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("cpu ", 0) != 0) continue;
    std::istringstream f(line.substr(4));
    std::vector<uint64_t> cols;
    uint64_t v = 0;
    while (f >> v) cols.push_back(v);
    // user nice system idle iowait irq softirq steal [guest guest_nice]; guest
    // time is already inside user, so the total stops at steal.
    if (cols.size() < 8) return {};
    CpuTimes t;
    for (size_t i = 0; i < 8; ++i) t.total += cols[i];
    t.steal = cols[7];
    t.ok = true;
    return t;
  }
  return {};
}

CpuTimes read_cpu_times(const std::string& path) {
  std::ifstream f(path);
  if (!f) return {};
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_cpu_times(ss.str());
}

double steal_pct(const CpuTimes& before, const CpuTimes& after) {
  if (!before.ok || !after.ok || after.total <= before.total || after.steal < before.steal) return -1;
  return 100.0 * static_cast<double>(after.steal - before.steal) / static_cast<double>(after.total - before.total);
}

std::vector<bool> calm_rounds(const std::vector<double>& steal) {
  std::vector<bool> use;
  bool any = false;
  for (double st : steal) {
    use.push_back(st <= kStealWarnPct);
    any = any || use.back();
  }
  if (!any) use.assign(use.size(), true);
  return use;
}

}  // namespace dptwin
