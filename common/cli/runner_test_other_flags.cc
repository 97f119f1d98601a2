// A flag that runner_test's own command does not own (another file): the
// short name of one of its prefixed flags (Note [Short flag names]).
#include "absl/flags/flag.h"

ABSL_FLAG(int, budget, 3, "Another command's --budget.");
