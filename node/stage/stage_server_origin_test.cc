// Note [Checkable evidence], the origin's part: the data node signs its
// stage-0 output and the route it sends it on, every hop passes that on,
// and each receiver holds hop 1's input hash and the frame's route to it.
// Timed computes on the simulated in-process transport, a 4-stage route.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/sim_clock.h"
#include "identity/identity.h"
#include "node/compute/evidence.h"
#include "node/compute/timed_stage_compute.h"
#include "node/stage/stage_server.h"
#include "node/stage/stage_server_test_util.h"
#include "node/transport/frame.h"
#include "node/transport/inproc_transport.h"

namespace skipswarm::node {
namespace {

// Nodes 0 (data node), 1 (stage 1), 2 (stage 2), 3 (stage 3), 4 (stage 1)
// and 5 (stage 2), each with its own key, all signing and requiring
// commitments (a signing swarm); one view shared by all.
// What both swarms below share: a micro-batch run along the swarm's route,
// and the check that it failed on one commitment refused at `node`.
class RoutedSwarm : public testing::SigningSwarm {
 public:
  using SigningSwarm::SigningSwarm;
  virtual void Run(uint64_t mb) = 0;
  int64_t Refused(int node) const { return servers_[node]->stats().commitments_refused; }
  // Runs micro-batch 1: `node` refuses one commitment and the micro-batch
  // fails.
  void RunExpectingRefusalAt(int node) {
    Run(1);
    EXPECT_EQ(Refused(node), 1);
    ASSERT_EQ(recorder_.finished.count(1), 1u);
    EXPECT_FALSE(recorder_.finished[1].ok());
  }
  // The same where the hops before `node` are hostile: their abort notices
  // follow the route they rewrote, so the origin may learn of the end only
  // at its deadline; `node` ran nothing.
  void RunExpectingRefusalPastAccomplicesAt(int node) {
    Run(1);
    EXPECT_EQ(Refused(node), 1);
    EXPECT_FALSE(recorder_.finished.count(1) == 1 && recorder_.finished[1].ok());
    EXPECT_EQ(servers_[node]->stats().forwards, 0);
  }
};

class Swarm : public RoutedSwarm {
 public:
  Swarm() : RoutedSwarm({0, 1, 2, 3, 1, 2}, /*require=*/true) {}

  void Inject(uint64_t mb) {
    std::vector<RouteHop> route = {
        {keys_[0]->id(), 0}, {keys_[1]->id(), 1}, {keys_[2]->id(), 2}, {keys_[3]->id(), 3}};
    ASSERT_TRUE(servers_[0]->Inject(0, mb, route, {}).ok());
  }
  void Run(uint64_t mb) override {
    Inject(mb);
    clock_.Advance(absl::Seconds(1));
  }
};

TEST(StageServerOriginTest, TheOriginSignsItsOutputAndRouteAndEveryHopPassesItOn) {
  Swarm swarm;
  std::vector<proto::FrameHeader> seen;
  for (int node : {0, 1, 2, 3}) {
    swarm.editing_[node]->edit = [&seen](Frame& f) { seen.push_back(f.header); };
  }
  swarm.Run(1);
  ASSERT_EQ(swarm.recorder_.finished.count(1), 1u);
  EXPECT_TRUE(swarm.recorder_.finished[1].ok()) << swarm.recorder_.finished[1];
  ASSERT_EQ(seen.size(), 4u);
  const proto::OriginCommitment& o = seen[0].origin_commitment();
  EXPECT_TRUE(VerifyOrigin(o, swarm.keys_[0]->public_key()).ok());
  EXPECT_EQ(o.route_size(), 4);
  for (const proto::FrameHeader& h : seen) {
    EXPECT_EQ(OriginSigningBytes(h.origin_commitment()), OriginSigningBytes(o));
  }
  EXPECT_EQ(seen[1].commitment().input_sha256(), o.output_sha256());
  for (int node : {0, 1, 2, 3}) EXPECT_EQ(swarm.Refused(node), 0) << node;
}

// Hop 1 signs a false input hash: before, nothing could refute it (stage 0
// signed nothing); now the hop after checks it against the origin's.
TEST(StageServerOriginTest, AForgedStage0OutputHashAtHop1IsRefused) {
  Swarm swarm;
  swarm.editing_[1]->edit = [&swarm](Frame& f) {
    f.header.mutable_commitment()->set_input_sha256(std::string(32, 'x'));
    ASSERT_TRUE(SignCommitment(*swarm.keys_[1], f.header.mutable_commitment()).ok());
  };
  swarm.RunExpectingRefusalAt(2);
}

// In a signing swarm a hop that strips the origin's commitment is refused.
TEST(StageServerOriginTest, AStrippedOriginCommitmentIsRefused) {
  Swarm swarm;
  swarm.editing_[1]->edit = [](Frame& f) { f.header.clear_origin_commitment(); };
  swarm.Run(1);
  EXPECT_EQ(swarm.Refused(2), 1);
}

// Hop 2 (node 2) rewrites the route it forwards so that hop 1 reads as its
// accomplice node 4, who signs a matching commitment for hop 1: every
// commitment the receiver at hop 3 can check verifies, but the route is
// not the one the origin sent.
TEST(StageServerOriginTest, ARouteRewrittenInTheMiddleIsRefused) {
  Swarm swarm;
  swarm.editing_[2]->edit = [&swarm](Frame& f) {
    if (f.header.hop_index() != 3) return;
    f.header.mutable_route(1)->set_node_id(swarm.keys_[4]->id().Bytes());
    ASSERT_TRUE(SignCommitment(*swarm.keys_[4], f.header.mutable_input_commitment()).ok());
    f.header.mutable_commitment()->set_input_commitment_sha256(
        CommitmentDigest(f.header.input_commitment()));
    ASSERT_TRUE(SignCommitment(*swarm.keys_[2], f.header.mutable_commitment()).ok());
  };
  swarm.RunExpectingRefusalAt(3);
}

// The origin re-routes hop 1 (node 1 dead: to node 4, re-signing) and hop
// 1 re-routes hop 2 (node 2 dead: to node 5, the origin's commitment
// unchanged): both repairs are accepted on every hop.
TEST(StageServerOriginTest, AnHonestlyReroutedMicroBatchIsAccepted) {
  Swarm swarm;
  swarm.view_->MarkDead(swarm.keys_[1]->id());
  std::vector<proto::FrameHeader> tails;
  swarm.editing_[3]->edit = [&tails](Frame& f) { tails.push_back(f.header); };
  swarm.Inject(1);
  // Stage 0 has run (10 ms) and hop 1 has not: node 2 dies after the
  // origin's repair, before hop 1's send.
  swarm.clock_.Advance(absl::Milliseconds(15));
  swarm.view_->MarkDead(swarm.keys_[2]->id());
  swarm.clock_.Advance(absl::Seconds(1));
  ASSERT_EQ(swarm.recorder_.finished.count(1), 1u);
  EXPECT_TRUE(swarm.recorder_.finished[1].ok()) << swarm.recorder_.finished[1];
  EXPECT_EQ(swarm.servers_[0]->stats().rerouted, 1);
  EXPECT_EQ(swarm.servers_[4]->stats().rerouted, 1);
  // Note [Signed route prefix]: hop 1 had signed node 2 as its next hop.
  EXPECT_EQ(swarm.servers_[4]->stats().commitments_resigned, 1);
  for (int node : {0, 3, 4, 5}) EXPECT_EQ(swarm.Refused(node), 0) << node;
  ASSERT_EQ(tails.size(), 1u);
  EXPECT_EQ(tails[0].route(1).node_id(), swarm.keys_[4]->id().Bytes());
  EXPECT_EQ(tails[0].route(2).node_id(), swarm.keys_[5]->id().Bytes());
  EXPECT_EQ(tails[0].origin_commitment().route(1).node_id(), swarm.keys_[4]->id().Bytes());
  EXPECT_EQ(tails[0].origin_commitment().route(2).node_id(), swarm.keys_[2]->id().Bytes());
}

// Note [Signed route prefix]: backward frames carry none of the forward's
// commitments (nothing on the backward path checks them).
TEST(StageServerOriginTest, BackwardFramesCarryNoCommitments) {
  Swarm swarm;
  std::vector<proto::FrameHeader> tails;
  swarm.editing_[3]->edit = [&tails](Frame& f) { tails.push_back(f.header); };
  swarm.Run(1);
  ASSERT_EQ(tails.size(), 1u);
  proto::FrameHeader stripped = tails[0];
  stripped.clear_commitment();
  stripped.clear_input_commitment();
  stripped.clear_origin_commitment();
  stripped.clear_earlier_commitments();
  std::printf("FIGURE backward frame header bytes saved=%zu of %zu (4-hop route)\n",
              tails[0].ByteSizeLong() - stripped.ByteSizeLong(), tails[0].ByteSizeLong());
  ASSERT_EQ(swarm.recorder_.finished.count(1), 1u);
  EXPECT_TRUE(swarm.recorder_.finished[1].ok()) << swarm.recorder_.finished[1];
  int backwards = 0;
  for (int node : {0, 1, 2, 3}) {
    for (const proto::FrameHeader& h : swarm.editing_[node]->backwards) {
      ++backwards;
      EXPECT_FALSE(h.has_commitment()) << node;
      EXPECT_FALSE(h.has_input_commitment()) << node;
      EXPECT_FALSE(h.has_origin_commitment()) << node;
      EXPECT_EQ(h.earlier_commitments_size(), 0) << node;
    }
  }
  EXPECT_EQ(backwards, 4);  // the origin's tail gradient, then hops 3, 2, 1
}

// A hostile node's options: it checks no commitment it receives (an
// accomplice of the hop before), and otherwise runs as any other.
std::function<void(int, StageServerOptions&)> AccompliceAt(int accomplice) {
  return [accomplice](int node, StageServerOptions& o) {
    if (node == accomplice) o.public_key_of = nullptr;
  };
}

// Note [Signed route prefix]: nodes 0..5 run stages 0..5 along the route
// [0, 1, 2, 3, 4, 5]; node 6 is a second replica of stage 2.
class LongSwarm : public RoutedSwarm {
 public:
  // `tweak` as SigningSwarm's (a hostile node's options).
  explicit LongSwarm(std::function<void(int, StageServerOptions&)> tweak = nullptr)
      : RoutedSwarm({0, 1, 2, 3, 4, 5, 2}, /*require=*/true, std::move(tweak)) {}

  void Run(uint64_t mb) override {
    std::vector<RouteHop> route;
    for (int node = 0; node < 6; ++node) route.push_back({keys_[node]->id(), node});
    ASSERT_TRUE(servers_[0]->Inject(0, mb, route, {}).ok());
    clock_.Advance(absl::Seconds(1));
  }
  // Hostile `node` renames hop 2 (node 2) as node 6 on the frame it sends
  // and re-signs its own commitment over the renamed prefix: only the
  // hop before's signed prefix can tell.
  void RenameHop2At(int node) {
    editing_[node]->edit = [this](Frame& f) {
      f.header.mutable_route(2)->set_node_id(keys_[6]->id().Bytes());
      proto::OutputCommitment* c = f.header.mutable_commitment();
      c->set_route_sha256(SignedRouteDigest(f.header.route(), c->hop_index()));
      ASSERT_TRUE(SignCommitment(*keys_[c->hop_index()], c).ok());
    };
  }
  // Hostile hop 3 (node 3), which received honest node 2's output, names
  // `claimant` at hop 2 on the frame it sends hop 4: the claimant signs
  // node 2's visit as its own (node 2's input and output hashes, bound to
  // hop 1's commitment, over the renamed prefix) and node 3 re-signs its
  // own commitment over that and the renamed prefix. Every signature the
  // frame carries verifies; only hop 1's signed prefix, which names the
  // hop it sent its output to, can tell.
  void ClaimHop2For(int claimant) {
    editing_[3]->edit = [this, claimant](Frame& f) {
      f.header.mutable_route(2)->set_node_id(keys_[claimant]->id().Bytes());
      proto::OutputCommitment* in = f.header.mutable_input_commitment();
      in->set_producer(keys_[claimant]->id().Bytes());
      in->set_route_sha256(SignedRouteDigest(f.header.route(), 2));
      ASSERT_TRUE(SignCommitment(*keys_[claimant], in).ok());
      proto::OutputCommitment* c = f.header.mutable_commitment();
      c->set_input_commitment_sha256(CommitmentDigest(*in));
      c->set_route_sha256(SignedRouteDigest(f.header.route(), 3));
      ASSERT_TRUE(SignCommitment(*keys_[3], c).ok());
    };
  }
};

TEST(StageServerOriginTest, EveryHopSignsTheRoutePrefixItForwards) {
  LongSwarm swarm;
  std::vector<proto::FrameHeader> seen;
  for (int node = 1; node < 6; ++node) {
    swarm.editing_[node]->edit = [&seen](Frame& f) { seen.push_back(f.header); };
  }
  swarm.Run(1);
  ASSERT_EQ(swarm.recorder_.finished.count(1), 1u);
  EXPECT_TRUE(swarm.recorder_.finished[1].ok()) << swarm.recorder_.finished[1];
  ASSERT_EQ(seen.size(), 5u);
  for (const proto::FrameHeader& h : seen) {
    const int hop = static_cast<int>(h.commitment().hop_index());
    std::printf("FIGURE forward frame from hop %d: %zu header bytes, %d commitments\n", hop,
                h.ByteSizeLong(), h.earlier_commitments_size() + 1 + (hop > 1 ? 1 : 0));
    // Up to the hop it sends to (the whole route from the last hop).
    EXPECT_EQ(h.commitment().route_sha256(), RouteDigest(h.route(), std::min(hop + 2, 6))) << hop;
    if (hop > 1) {
      EXPECT_EQ(h.input_commitment().route_sha256(), RouteDigest(h.route(), hop + 1)) << hop;
    }
    // Every hop before the input commitment's, in hop order.
    ASSERT_EQ(h.earlier_commitments_size(), std::max(0, hop - 2)) << hop;
    for (int j = 1; j <= hop - 2; ++j) {
      const proto::OutputCommitment& e = h.earlier_commitments(j - 1);
      EXPECT_EQ(e.hop_index(), static_cast<uint32_t>(j));
      EXPECT_EQ(e.producer(), swarm.keys_[j]->id().Bytes());
      EXPECT_EQ(e.route_sha256(), RouteDigest(h.route(), j + 2)) << hop << " " << j;
      EXPECT_TRUE(VerifyCommitment(e, swarm.keys_[j]->public_key()).ok());
    }
  }
  for (int node = 0; node < 6; ++node) EXPECT_EQ(swarm.Refused(node), 0) << node;
}

// Hop 4 (node 4) renames hop 2 on the forward it sends hop 5: its own
// signature and the origin's (route[0..1], the length) still verify, and
// the input commitment is hop 3's own; hop 3's signed prefix names node 2.
TEST(StageServerOriginTest, AHostileHopRenamingAnEarlierHopIsRefused) {
  LongSwarm swarm;
  swarm.RenameHop2At(4);
  swarm.RunExpectingRefusalAt(5);
}

// The same by the last hop on the tail it sends the origin.
TEST(StageServerOriginTest, ALastHopRenamingAnEarlierHopIsRefusedAtTheOrigin) {
  LongSwarm swarm;
  swarm.RenameHop2At(5);
  swarm.RunExpectingRefusalAt(0);
}

// Two hostile hops in a row: hop 3 (node 3) renames hop 2 as node 6 and
// re-signs its own commitment, and hop 4 (node 4, its accomplice) checks
// nothing and forwards it as it would any frame. Both commitments hop 5
// receives are the accomplices' own and sign the renamed prefix; only hop
// 2's own commitment, which node 2 signed over its name, can tell.
TEST(StageServerOriginTest, TwoHostileHopsInARowRenamingAnEarlierHopAreRefused) {
  LongSwarm swarm(AccompliceAt(4));
  swarm.RenameHop2At(3);
  swarm.RunExpectingRefusalPastAccomplicesAt(5);
}

// The same, where the accomplice also drops hop 2's commitment (it cannot
// sign one for node 6): a hop that signs may not go missing.
TEST(StageServerOriginTest, DroppingTheRenamedHopsCommitmentIsRefused) {
  LongSwarm swarm(AccompliceAt(4));
  swarm.RenameHop2At(3);
  swarm.editing_[4]->edit = [](Frame& f) {
    ASSERT_EQ(f.header.earlier_commitments_size(), 2);
    f.header.mutable_earlier_commitments()->RemoveLast();  // hop 2's
  };
  swarm.RunExpectingRefusalPastAccomplicesAt(5);
}

// More earlier commitments than hops before the producer: refused on the
// count, before any is hashed or verified.
TEST(StageServerOriginTest, TenThousandEarlierCommitmentsAreRefused) {
  LongSwarm swarm;
  swarm.editing_[3]->edit = [](Frame& f) {
    const proto::OutputCommitment hop1 = f.header.earlier_commitments(0);
    for (int i = 0; i < 10000; ++i) *f.header.add_earlier_commitments() = hop1;
  };
  swarm.RunExpectingRefusalAt(4);
}

// A producer that signs no route prefix is refused.
TEST(StageServerOriginTest, ACommitmentWithoutARoutePrefixIsRefused) {
  LongSwarm swarm;
  swarm.editing_[2]->edit = [&swarm](Frame& f) {
    f.header.mutable_commitment()->clear_route_sha256();
    ASSERT_TRUE(SignCommitment(*swarm.keys_[2], f.header.mutable_commitment()).ok());
  };
  swarm.RunExpectingRefusalAt(3);
}

// Note [Signed route prefix]: credit for an honest hop's work. Hostile hop
// 3 names its accomplice, node 6 (a replica of stage 2), at honest node
// 2's hop, with node 6's own valid commitment to node 2's visit.
TEST(StageServerOriginTest, AnAccompliceAtAnHonestHopsPlaceIsRefused) {
  LongSwarm swarm;
  swarm.ClaimHop2For(6);
  swarm.RunExpectingRefusalAt(4);
}

// The same where hostile hop 3 drops honest node 2 and stands at its hop
// itself (hops 2 and 3 both its own, as one node on consecutive hops).
TEST(StageServerOriginTest, AHostileHopDroppingTheHonestHopBeforeIsRefused) {
  LongSwarm swarm;
  swarm.ClaimHop2For(3);
  swarm.RunExpectingRefusalAt(4);
}

// Hop 1 (node 1) re-routes hop 2 to the other replica (node 2 dead): it
// re-signs its commitment for node 6, and every hop accepts.
TEST(StageServerOriginTest, ARepairToAnotherReplicaIsResignedAndAccepted) {
  LongSwarm swarm;
  swarm.view_->MarkDead(swarm.keys_[2]->id());
  std::vector<proto::FrameHeader> tails;
  swarm.editing_[5]->edit = [&tails](Frame& f) { tails.push_back(f.header); };
  swarm.Run(1);
  ASSERT_EQ(swarm.recorder_.finished.count(1), 1u);
  EXPECT_TRUE(swarm.recorder_.finished[1].ok()) << swarm.recorder_.finished[1];
  EXPECT_EQ(swarm.servers_[1]->stats().rerouted, 1);
  EXPECT_EQ(swarm.servers_[1]->stats().commitments_resigned, 1);
  for (int node : {0, 3, 4, 5, 6}) EXPECT_EQ(swarm.Refused(node), 0) << node;
  ASSERT_EQ(tails.size(), 1u);
  EXPECT_EQ(tails[0].route(2).node_id(), swarm.keys_[6]->id().Bytes());
}

// Skips (allow_skip, no other replica): hop 2 skips dead stage 3 and
// re-signs for node 4; hop 4 skips dead stage 5 and re-signs for the
// origin (now the last hop: the whole, shorter route).
TEST(StageServerOriginTest, SkipRepairsAreResignedAndAccepted) {
  for (int dead : {3, 5}) {
    LongSwarm swarm([](int, StageServerOptions& o) { o.allow_skip = true; });
    swarm.view_->MarkDead(swarm.keys_[dead]->id());
    swarm.Run(1);
    ASSERT_EQ(swarm.recorder_.finished.count(1), 1u) << dead;
    EXPECT_TRUE(swarm.recorder_.finished[1].ok()) << dead << ": " << swarm.recorder_.finished[1];
    const int holder = dead - 1;
    EXPECT_EQ(swarm.servers_[holder]->stats().rerouted, 1) << dead;
    EXPECT_EQ(swarm.servers_[holder]->stats().commitments_resigned, 1) << dead;
    for (int node = 0; node < 6; ++node) EXPECT_EQ(swarm.Refused(node), 0) << dead << " " << node;
  }
}

}  // namespace
}  // namespace skipswarm::node
