// `skipswarm node` in a gossip swarm (--join / a first node) and
// `skipswarm node drain`; the flags live in gossip_command.cc. The node
// command (node_command.cc) hands over here when no --swarm list is given.
//
// Thread rule: main's thread.
#ifndef SKIPSWARM_CLI_GOSSIP_COMMAND_H_
#define SKIPSWARM_CLI_GOSSIP_COMMAND_H_

#include "absl/status/status.h"
#include "cli/manifest_step.h"
#include "node/daemon/static_swarm/node_daemon.h"

namespace skipswarm::cli {

// For Command::flag_files.
extern const char kGossipFlagsFile[];

// Installs the gossip node's SIGINT / SIGTERM / SIGUSR1 / SIGUSR2 handlers
// (Note [Stopping] in gossip_daemon.cc): from then on a stop is recorded
// for the daemon instead of killing the process. The node command calls it
// first thing (a joiner's manifest fetch comes before RunGossipNode);
// calling it again changes nothing.
void InstallGossipSignalHandlers();

// Runs a GossipDaemon built from `base` (the node flags) and the gossip
// flags until it is done, stopped (SIGINT) or drained (SIGTERM); its node
// server also serves `manifest` (PrepareSwarmManifest's).
absl::Status RunGossipNode(const node::NodeDaemonOptions& base, SwarmManifestStep* manifest,
                           const node::NodeBackend& backend);
// `skipswarm node drain --control=HOST:PORT [--force]`: exit code.
int RunDrainCommand();
// `skipswarm node pause|resume --control=HOST:PORT [--force]` (Note [Paused
// members]): exit code.
int RunPauseCommand(bool resume);

}  // namespace skipswarm::cli

#endif  // SKIPSWARM_CLI_GOSSIP_COMMAND_H_
