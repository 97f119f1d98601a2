// A hostile peer built from the wire contracts alone (proto/*.proto,
// manifest/manifest.proto): it knows nothing of the node's code, only what
// a stranger on the network can send. It finds a swarm's members through
// one gossip push-pull to a bootstrap address (plain text: the local
// swarm's default) and then runs one attack against every member for a
// while, counting each answer by its gRPC code:
//
//   frames     far-future pipeline frames (slot exhaustion)
//   pushes     gradient pushes declaring 128 MiB (memory)
//   gossip     pings of 64 junk records each, back to back (processing cost)
//   suspicion  unsigned DEAD opinions at incarnation 2^64-1 about every member
//   state      state requests for every hosted stage (both services)
//   manifest   GetManifest calls
//
//   HostileOptions o{.bootstrap = "127.0.0.1:7000", .swarm_id = "skipswarm"};
//   absl::StatusOr<AttackReport> r = RunAttack("frames", o, clock);
//
// Thread rule: RunAttack blocks; it runs one thread per member.
#ifndef SKIPSWARM_TESTS_ADVERSARIAL_HOSTILE_HOSTILE_CLIENT_H_
#define SKIPSWARM_TESTS_ADVERSARIAL_HOSTILE_HOSTILE_CLIENT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace skipswarm::hostile {

struct HostileOptions {
  std::string bootstrap;  // a member's gossip address, HOST:PORT
  std::string swarm_id = "skipswarm";  // DeriveSwarmId(name, secret); "skipswarm" by default
  std::string name = "mallory";         // our (throw-away) identity's seed
  absl::Duration duration = absl::Seconds(10);
  // Pipeline frames: payload of each (fp32 elements x 4) and the iteration
  // they claim (far ahead of any real one).
  uint64_t frame_bytes = 16 << 10;
  // frames: one stderr line per stream (frames and bytes gRPC took, how
  // long it lived, how it ended).
  bool trace_streams = false;
  uint64_t frame_iteration = 1'000'000'000;
  // Gradient pushes: the elements each declares.
  int64_t push_elements = int64_t{32} << 20;
};

struct Member {
  std::string id;  // 32 raw bytes
  std::string address;
  std::vector<uint32_t> stages;
  bool alive = true;
};

struct AttackReport {
  std::string attack;
  int members = 0;                      // attacked
  uint64_t sent = 0;                    // requests (frames, pushes, calls)
  uint64_t bytes_sent = 0;
  uint64_t streams = 0;                 // opened (frames)
  std::map<std::string, uint64_t> answers;  // gRPC code name -> count
  // From the attack's start to the first answer that refused it
  // (RESOURCE_EXHAUSTED, PERMISSION_DENIED, INVALID_ARGUMENT,
  // FAILED_PRECONDITION, UNAUTHENTICATED); negative: never refused.
  double first_refusal_s = -1;
  int members_alive_after = 0;  // in the bootstrap's view after the attack
  std::string Json() const;     // one line
};

// One push-pull to `o.bootstrap`: the members it lists (ALIVE or SUSPECT).
absl::StatusOr<std::vector<Member>> Discover(const HostileOptions& o);

// Runs `attack` (see the file comment) against every member for
// o.duration. `clock` (borrowed) times it.
absl::StatusOr<AttackReport> RunAttack(const std::string& attack, const HostileOptions& o,
                                       common::Clock* clock);

}  // namespace skipswarm::hostile

#endif  // SKIPSWARM_TESTS_ADVERSARIAL_HOSTILE_HOSTILE_CLIENT_H_
