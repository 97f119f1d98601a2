#include "launcher/progress_log.h"

#include <fstream>

#include "nlohmann/json.hpp"

namespace skipswarm::launcher {

void ReadProgress(const std::string& path, std::map<int64_t, ProgressPoint>& points,
                  int64_t& rerouted) {
  std::ifstream in(path);
  std::string line;
  points.clear();
  rerouted = 0;
  while (std::getline(in, line)) {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) continue;
    const auto number = [&j](const char* key, double fallback) {
      const auto it = j.find(key);
      return it != j.end() && it->is_number() ? it->get<double>() : fallback;
    };
    rerouted += static_cast<int64_t>(number("rerouted_here", 0));
    const auto it = j.find("iteration");
    const auto loss = j.find("loss");
    if (it == j.end() || !it->is_number_integer() || loss == j.end() || !loss->is_number()) {
      continue;
    }
    ProgressPoint& pt = points[it->get<int64_t>()];
    if (loss->get<double>() >= 0) {
      pt.loss_sum += loss->get<double>();
      ++pt.n;
    }
    pt.dropped += static_cast<int>(number("dropped", 0));
    pt.tokens += number("tokens", 0);
    pt.elapsed = std::max(pt.elapsed, number("elapsed_s", 0));
  }
}

}  // namespace skipswarm::launcher
