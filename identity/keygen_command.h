// `skipswarm keygen`: creates a node's Ed25519 identity key (mode 0600) and
// prints its node id; optionally writes the self-signed certificate.
//
//   skipswarm keygen --key_file=/var/lib/skipswarm/node.key
//   skipswarm keygen --key_file=node.key --cert_file=node.crt
//   skipswarm keygen --key_file=node.key --show    # print id of existing key
//
// Thread rule: run from the CLI's main thread only.
#ifndef SKIPSWARM_IDENTITY_KEYGEN_COMMAND_H_
#define SKIPSWARM_IDENTITY_KEYGEN_COMMAND_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/cli/command.h"

namespace skipswarm::identity {

struct KeygenOptions {
  std::string key_file = "node.key";
  std::string cert_file;   // empty: no certificate written
  bool overwrite = false;  // replace an existing key (the node gets a new id)
  bool show = false;       // only load and describe an existing key
};

// Does the work of the command; returns the text to print (node id, files).
absl::StatusOr<std::string> RunKeygen(const KeygenOptions& options,
                                      absl::Time now);

common::cli::Command KeygenCommand();

}  // namespace skipswarm::identity

#endif  // SKIPSWARM_IDENTITY_KEYGEN_COMMAND_H_
