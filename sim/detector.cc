#include "sim/detector.h"

#include <cmath>

namespace skipswarm::sim {

double GossipSpreadSeconds(const DetectorParams& params, int members) {
  if (members <= 1) return 0;
  const double rounds =
      std::ceil(std::log(static_cast<double>(members)) /
                std::log(1 + params.gossip_fanout));
  return rounds * params.gossip_interval_s;
}

double GossipDetectSeconds(const DetectorParams& params, int members,
                           common::Random& rng) {
  const double t = params.probe_interval_s;
  double first_probe = rng.Uniform(0, t);
  if (members > 2) {
    const double others = members - 1;
    const double p = 1 - std::pow(1 - 1 / others, others);
    // Intervals that pass without anyone probing it.
    while (!rng.Bernoulli(p)) first_probe += t;
  }
  return first_probe + t + GossipSpreadSeconds(params, members) +
         params.suspicion_timeout_s;
}

}  // namespace skipswarm::sim
