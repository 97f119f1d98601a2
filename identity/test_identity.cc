#include "identity/test_identity.h"

#include <string>
#include <utility>

#include "glog/logging.h"

namespace skipswarm::identity {

std::unique_ptr<Identity> TestIdentity(char c) {
  absl::StatusOr<std::unique_ptr<Identity>> key =
      Identity::FromSeed(std::string(32, c));
  CHECK(key.ok()) << key.status();
  return *std::move(key);
}

common::NodeId TestNodeId(char c) { return TestIdentity(c)->id(); }

}  // namespace skipswarm::identity
