// The source //common/stamp:git_commit compiles without --stamp.
#include "common/stamp/git_commit.h"

namespace skipswarm::common {

const char* GitCommit() { return "unknown"; }

}  // namespace skipswarm::common
