// The swarm manifest step of `skipswarm node` in a gossip swarm
// (manifest/README.md), run before anything is built or any state moves:
//  * a founder (no --join) builds the manifest from its flags and signs it
//    with its node key (--insecure: a throwaway key);
//  * a joiner fetches it from --join (addresses and/or a swarm file),
//    verifies it, refuses a flag that disagrees with it (naming the flag)
//    and takes the model, optimiser, data and schedule settings from it.
// Either way the node serves the manifest onwards on its node server.
//
//   SS_ASSIGN_OR_RETURN(SwarmManifestStep m, PrepareSwarmManifest(&options));
//   ... RunGossipNode(options, m.service.get());
//
// Thread rule: main's thread (reads and, for the joiner's swarm name, sets
// flags).
#ifndef SKIPSWARM_CLI_MANIFEST_STEP_H_
#define SKIPSWARM_CLI_MANIFEST_STEP_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/peer_quota.h"
#include "common/real_clock.h"
#include "manifest/manifest_service.h"
#include "membership/admission.h"
#include "node/daemon/stack/node_daemon_options.h"

namespace skipswarm::cli {

// For Command::flag_files (--write_swarm_file).
extern const char kManifestFlagsFile[];

struct SwarmManifestStep {
  // Note [Peer quotas]: the service's per-address budget on its own clock
  // (declared first: they outlive the service).
  std::unique_ptr<common::RealClock> quota_clock;
  std::shared_ptr<common::PeerQuota> quota;
  std::unique_ptr<manifest::ManifestService> service;  // to register on the node server
  std::string sha256;
  std::string swarm_name;     // the manifest's
  std::string founder_id;     // hex
  bool joiner = false;
  // A joiner's bootstrap addresses (--join's, swarm files expanded) for
  // gossip to join through.
  std::vector<std::string> bootstrap;
  absl::Duration fetch_time;  // a joiner's fetch and verification
  // The manifest's admission policy and this node's invite, checked here
  // (Note [Admission] in membership/admission.h).
  membership::AdmissionPolicy admission;
  proto::SignedInvite invite;
  // The join work a busy seed asked of a joiner, solved for this manifest
  // (Note [Manifest joiners]); 0: none (the gossip step solves it).
  uint64_t join_work = 0;
  // The private swarm's secret (cli/swarm_secret.h); empty: none.
  std::string swarm_secret;
};

// REQUIRES: `o` holds the node flags (ReadModelFlags and the rest).
absl::StatusOr<SwarmManifestStep> PrepareSwarmManifest(node::NodeDaemonOptions* o);

// --write_swarm_file: writes swarm.json naming `gossip_address`; a no-op
// when the flag is empty.
absl::Status MaybeWriteSwarmFile(const SwarmManifestStep& step, const std::string& gossip_address);

}  // namespace skipswarm::cli

#endif  // SKIPSWARM_CLI_MANIFEST_STEP_H_
