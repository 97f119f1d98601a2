// A populated StatusBoard for tests of the status page (testonly): a
// gossip view of five members over three stages (this node "d0" hosting
// stage 0, one member outbound-only, one DEAD, stage 2 with a single
// replica), measured links, and 30 iterations of falling loss with a
// re-route at iteration 12 and a member death at iteration 20.
//
// Thread rule: call from the test's thread.
#ifndef SKIPSWARM_NODE_DAEMON_REPORTING_SAMPLE_STATUS_H_
#define SKIPSWARM_NODE_DAEMON_REPORTING_SAMPLE_STATUS_H_

#include "common/sim_clock.h"
#include "membership/view.h"
#include "node/daemon/reporting/status_board.h"

namespace skipswarm::node {

inline constexpr int kSampleMembers = 5;
inline constexpr int kSampleIterations = 30;

// The sample's view (members sorted by id, as Membership gives them).
membership::View SampleView();
// Feeds `board` (made with `clock`) the sample; advances `clock` by one
// second per iteration.
void FillSampleBoard(StatusBoard* board, common::SimClock* clock);

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_DAEMON_REPORTING_SAMPLE_STATUS_H_
