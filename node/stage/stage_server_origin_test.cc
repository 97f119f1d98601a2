// Note [Checkable evidence], the origin's part: the data node signs its
// stage-0 output and the route it sends it on, every hop passes that on,
// and each receiver holds hop 1's input hash and the frame's route to it.
// Timed computes on the simulated in-process transport, a 4-stage route.
#include <gtest/gtest.h>

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
#include "node/transport/frame.h"
#include "node/transport/inproc_transport.h"

namespace skipswarm::node {
namespace {

struct Recorder : OriginListener {
  void OnTail(uint64_t, uint64_t, double) override {}
  void OnFinished(uint64_t, uint64_t mb, const absl::Status& s) override { finished[mb] = s; }
  std::map<uint64_t, absl::Status> finished;
};

// A node's outgoing side: `edit` may change each forward frame it sends.
class EditingTransport final : public Transport {
 public:
  explicit EditingTransport(std::unique_ptr<Transport> inner) : inner_(std::move(inner)) {}
  PeerId self() const override { return inner_->self(); }
  void SetFrameHandler(FrameHandler h) override { inner_->SetFrameHandler(std::move(h)); }
  void SetPeerFailureHandler(PeerFailureHandler h) override {
    inner_->SetPeerFailureHandler(std::move(h));
  }
  void SetPeerAddress(const PeerId& p, std::string a) override {
    inner_->SetPeerAddress(p, std::move(a));
  }
  void ForgetPeer(const PeerId& p) override { inner_->ForgetPeer(p); }
  void Send(const PeerId& to, Frame frame, SendDone done) override {
    if (frame.header.direction() == proto::DIRECTION_FORWARD && edit) edit(frame);
    inner_->Send(to, std::move(frame), std::move(done));
  }
  std::function<void(Frame&)> edit;

 private:
  std::unique_ptr<Transport> inner_;
};

// Nodes 0 (data node), 1 (stage 1), 2 (stage 2), 3 (stage 3), 4 (stage 1)
// and 5 (stage 2), each with its own key, all signing and requiring
// commitments (a signing swarm); one view shared by all.
class Swarm {
 public:
  Swarm() : board_(&clock_, SwitchboardOptions{}) {
    const std::vector<int> stages = {0, 1, 2, 3, 1, 2};
    std::vector<PeerInfo> members;
    for (size_t i = 0; i < stages.size(); ++i) {
      auto key = identity::Identity::FromSeed(std::string(32, static_cast<char>('a' + i)));
      EXPECT_TRUE(key.ok());
      keys_.push_back(*std::move(key));
      public_keys_[keys_.back()->id()] = keys_.back()->public_key();
      members.push_back({keys_.back()->id(), {stages[i]}, 4, "", ""});
    }
    view_ = std::make_unique<StaticSwarmView>(members);
    for (size_t i = 0; i < stages.size(); ++i) {
      auto t = board_.Attach(keys_[i]->id());
      EXPECT_TRUE(t.ok());
      auto editing = std::make_unique<EditingTransport>(*std::move(t));
      editing_.push_back(editing.get());
      computes_.push_back(std::make_unique<TimedStageCompute>(
          &clock_, TimedStageCompute::Options{.stage = stages[i],
                                              .forward = absl::Milliseconds(10)}));
      StageServerOptions o;
      o.signer = keys_[i].get();
      o.public_key_of = [this](const PeerId& p) -> std::optional<std::string> {
        auto it = public_keys_.find(p);
        if (it == public_keys_.end()) return std::nullopt;
        return it->second;
      };
      o.require_commitments = true;
      servers_.push_back(std::make_unique<StageServer>(
          editing.get(), &clock_, view_.get(),
          std::map<int, StageCompute*>{{stages[i], computes_.back().get()}}, o));
      servers_.back()->Attach();
      servers_.back()->SetOriginListener(&recorder_);
      transports_.push_back(std::move(editing));
    }
  }

  void Inject(uint64_t mb) {
    std::vector<RouteHop> route = {
        {keys_[0]->id(), 0}, {keys_[1]->id(), 1}, {keys_[2]->id(), 2}, {keys_[3]->id(), 3}};
    ASSERT_TRUE(servers_[0]->Inject(0, mb, route, {}).ok());
  }
  void Run(uint64_t mb) {
    Inject(mb);
    clock_.Advance(absl::Seconds(1));
  }
  int64_t Refused(int node) const { return servers_[node]->stats().commitments_refused; }

  common::SimClock clock_;
  Switchboard board_;
  std::vector<std::unique_ptr<identity::Identity>> keys_;
  std::map<PeerId, std::string> public_keys_;
  std::unique_ptr<StaticSwarmView> view_;
  std::vector<EditingTransport*> editing_;
  std::vector<std::unique_ptr<Transport>> transports_;
  std::vector<std::unique_ptr<TimedStageCompute>> computes_;
  std::vector<std::unique_ptr<StageServer>> servers_;
  Recorder recorder_;
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
  swarm.Run(1);
  EXPECT_EQ(swarm.Refused(2), 1);
  ASSERT_EQ(swarm.recorder_.finished.count(1), 1u);
  EXPECT_FALSE(swarm.recorder_.finished[1].ok());
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
  swarm.Run(1);
  EXPECT_EQ(swarm.Refused(3), 1);
  ASSERT_EQ(swarm.recorder_.finished.count(1), 1u);
  EXPECT_FALSE(swarm.recorder_.finished[1].ok());
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
  for (int node : {0, 3, 4, 5}) EXPECT_EQ(swarm.Refused(node), 0) << node;
  ASSERT_EQ(tails.size(), 1u);
  EXPECT_EQ(tails[0].route(1).node_id(), swarm.keys_[4]->id().Bytes());
  EXPECT_EQ(tails[0].route(2).node_id(), swarm.keys_[5]->id().Bytes());
  EXPECT_EQ(tails[0].origin_commitment().route(1).node_id(), swarm.keys_[4]->id().Bytes());
  EXPECT_EQ(tails[0].origin_commitment().route(2).node_id(), swarm.keys_[2]->id().Bytes());
}

}  // namespace
}  // namespace skipswarm::node
