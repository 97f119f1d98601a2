// Seeded identities for tests, benchmarks and test fixtures: one helper for
// the `Identity::FromSeed(std::string(32, c))` that tests name their nodes
// with, so every test means the same key by the same character.
//
//   auto alice = identity::TestIdentity('a');
//   const common::NodeId bob_id = identity::TestNodeId('b');
//
// The key is the one `Identity::FromSeed` derives from 32 copies of `c`, so
// ids, signatures and saved key files are stable across runs and tests.
//
// Thread rule: free functions with no shared state; call from any thread.
#ifndef SKIPSWARM_IDENTITY_TEST_IDENTITY_H_
#define SKIPSWARM_IDENTITY_TEST_IDENTITY_H_

#include <memory>

#include "common/node_id.h"
#include "identity/identity.h"

namespace skipswarm::identity {

// The identity seeded with 32 copies of `c`. Never null: a seed of the right
// size always makes a key, and a failure here (a broken crypto library)
// aborts the test binary.
std::unique_ptr<Identity> TestIdentity(char c);

// TestIdentity(c)->id(), for tests that need only the node id.
common::NodeId TestNodeId(char c);

}  // namespace skipswarm::identity

#endif  // SKIPSWARM_IDENTITY_TEST_IDENTITY_H_
