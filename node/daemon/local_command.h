// `skipswarm local`: a real swarm of `skipswarm node` processes on
// loopback (fork/exec of this binary), training the default model on the
// default corpus with a live progress line, optional fault injection
// (--kill=NAME@ITER kills a node with SIGKILL once that iteration is
// reported), and a summary at the end: loss curve as CSV and SVG in
// --local_dir. Layout: --local_data_nodes data nodes (d0, d1, ...) and
// --local_replicas replicas of every other stage (s1r0, s1r1, ...).
// Ports are free ports found at start-up; each child gets a config file.
#ifndef SKIPSWARM_NODE_DAEMON_LOCAL_COMMAND_H_
#define SKIPSWARM_NODE_DAEMON_LOCAL_COMMAND_H_

#include "common/cli/command.h"

namespace skipswarm::node {

common::cli::Command LocalCommand();

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_DAEMON_LOCAL_COMMAND_H_
