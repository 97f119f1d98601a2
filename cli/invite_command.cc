#include "cli/invite_command.h"

#include <openssl/rand.h>

#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "cli/gossip_command.h"
#include "common/real_clock.h"
#include "absl/strings/escaping.h"
#include "manifest/invite_maker.h"
#include "manifest/revocation_maker.h"
#include "membership/admission.h"
#include "membership/revocation.h"

// Defined in gossip_command.cc.
ABSL_DECLARE_FLAG(std::string, node_key_file);
ABSL_DECLARE_FLAG(std::string, swarm_name);
ABSL_DECLARE_FLAG(std::string, revocations_file);

ABSL_FLAG(std::string, expires, "720h",
          "invite: how long the invite admits its holder (a duration: 720h) or until when (RFC "
          "3339: 2027-01-31T00:00:00Z). Members refuse the holder from then on.");
ABSL_FLAG(std::string, node_id, "",
          "invite: the joiner's node id (hex, `skipswarm keygen --show_key`); only that key may "
          "use the invite. Empty: any one key holding the token (keep it secret).");

namespace skipswarm::cli {

common::cli::Command InviteCommand() {
  return {"invite",
          "Founder of an --admission=invite swarm: print an invite token for a joiner",
          "skipswarm invite --key_file=founder.key [--swarm_name=S] [--expires=720h] "
          "[--node_id=HEX]",
          // Its own flags, and --node_key_file / --swarm_name (the node's).
          {"cli/invite_command.cc", kGossipFlagsFile},
          [](const std::vector<std::string>& args) {
            if (!args.empty()) {
              std::cerr << "invite takes no positional arguments\n";
              return 2;
            }
            std::string nonce(membership::kInviteNonceBytes, '\0');
            if (RAND_bytes(reinterpret_cast<unsigned char*>(nonce.data()),
                           static_cast<int>(nonce.size())) != 1) {
              std::cerr << "invite: no randomness from OpenSSL\n";
              return 1;
            }
            absl::StatusOr<std::string> token = manifest::MakeInvite(
                {absl::GetFlag(FLAGS_node_key_file), absl::GetFlag(FLAGS_swarm_name),
                 absl::GetFlag(FLAGS_expires), absl::GetFlag(FLAGS_node_id)},
                common::RealClock::Create()->Now(), nonce);
            if (!token.ok()) {
              std::cerr << "invite: " << token.status().message() << "\n";
              return 1;
            }
            std::cout << *token << "\n";
            // Note [Revocation]: the id `skipswarm revoke` takes for it.
            if (absl::StatusOr<proto::SignedInvite> inv = membership::DecodeInvite(*token);
                inv.ok()) {
              std::cerr << "invite id " << absl::BytesToHexString(membership::InviteId(*inv))
                        << " (to withdraw it: skipswarm revoke ... <that id>)\n";
            }
            return 0;
          },
          // Note [Short flag names]: `node` calls it --key_file too.
          {{"key_file", "node_key_file"}}};
}

common::cli::Command RevokeCommand() {
  return {"revoke",
          "Founder: add node ids or invites to the swarm's signed revocation list file",
          "skipswarm revoke --key_file=founder.key [--swarm_name=S] "
          "--revocations_file=revoked.txt NODE_ID|INVITE_ID|INVITE_TOKEN...",
          {kGossipFlagsFile},
          [](const std::vector<std::string>& args) {
            absl::StatusOr<manifest::RevokeResult> done = manifest::Revoke(
                {absl::GetFlag(FLAGS_node_key_file), absl::GetFlag(FLAGS_swarm_name),
                 absl::GetFlag(FLAGS_revocations_file), args},
                common::RealClock::Create()->Now());
            if (!done.ok()) {
              std::cerr << "revoke: " << done.status().message() << "\n";
              return 1;
            }
            std::cout << "revocation list " << done->serial << " (" << done->total
                      << " entries, " << done->added << " new) written to "
                      << absl::GetFlag(FLAGS_revocations_file)
                      << "; daemons started with --revocations_file=<it> gossip it within "
                         "seconds (copy it to one running member's file if the founder is "
                         "not running)\n";
            return 0;
          },
          {{"key_file", "node_key_file"}}};
}

}  // namespace skipswarm::cli
