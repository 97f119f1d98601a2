// hostile_client: runs one attack of hostile_client.h against a swarm and
// prints its report as one JSON line (tools/experiments/attack_suite.sh).
//
//   hostile_client --bootstrap=127.0.0.1:7000 --attack=frames --seconds=20
#include <iostream>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "common/real_clock.h"
#include "tests/adversarial/hostile/hostile_client.h"

ABSL_FLAG(std::string, bootstrap, "", "A member's gossip address, HOST:PORT.");
ABSL_FLAG(std::string, attack, "frames",
          "frames, pushes, gossip, suspicion, state or manifest (hostile_client.h).");
ABSL_FLAG(std::string, swarm_id, "skipswarm", "The swarm id (the swarm name without a secret).");
ABSL_FLAG(double, seconds, 10, "How long the attack runs.");
ABSL_FLAG(std::string, name, "mallory", "Seed of the attacker's throw-away node id.");
ABSL_FLAG(bool, trace_streams, false, "frames: one stderr line per stream it opened.");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  skipswarm::hostile::HostileOptions o;
  o.bootstrap = absl::GetFlag(FLAGS_bootstrap);
  o.swarm_id = absl::GetFlag(FLAGS_swarm_id);
  o.name = absl::GetFlag(FLAGS_name);
  o.duration = absl::Seconds(absl::GetFlag(FLAGS_seconds));
  o.trace_streams = absl::GetFlag(FLAGS_trace_streams);
  auto clock = skipswarm::common::RealClock::Create();
  absl::StatusOr<skipswarm::hostile::AttackReport> r =
      skipswarm::hostile::RunAttack(absl::GetFlag(FLAGS_attack), o, clock.get());
  if (!r.ok()) {
    std::cerr << "hostile_client: " << r.status() << "\n";
    return 1;
  }
  std::cout << r->Json() << std::endl;
  return 0;
}
