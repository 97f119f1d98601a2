// `skipswarm invite`: the founder of a swarm whose manifest says
// --admission=invite mints an invitation token (manifest/invite_maker.h,
// Note [Admission] in membership/admission.h).
//
//   skipswarm invite --node_key_file=founder.key --swarm_name=S --expires=720h
//       [--node_id=HEX] > n1.invite
//   skipswarm node --join=swarm.json --node_key_file=n1.key --invite=n1.invite
//
// Thread rule: the CLI's main thread.
#ifndef SKIPSWARM_CLI_INVITE_COMMAND_H_
#define SKIPSWARM_CLI_INVITE_COMMAND_H_

#include "common/cli/command.h"

namespace skipswarm::cli {

common::cli::Command InviteCommand();
// `skipswarm revoke`: the founder adds node ids, invite ids or invite
// tokens to the swarm's revocation list file (manifest/revocation_maker.h,
// Note [Revocation] in membership/revocation.h).
common::cli::Command RevokeCommand();

}  // namespace skipswarm::cli

#endif  // SKIPSWARM_CLI_INVITE_COMMAND_H_
