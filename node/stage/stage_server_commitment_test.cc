// Note [Checkable evidence] in the stage server: X signs a commitment on
// every forward frame it produces, the hop after checks it before
// admission, and a verifier Y signs its sketch answer with the hash of the
// input it got. Timed computes on the simulated in-process transport.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/crc32c.h"
#include "common/sim_clock.h"
#include "identity/identity.h"
#include "node/compute/evidence.h"
#include "node/compute/timed_stage_compute.h"
#include "node/stage/stage_server.h"
#include "node/transport/frame.h"
#include "node/transport/inproc_transport.h"

namespace skipswarm::node {
namespace {

using common::NodeId;

struct Recorder : OriginListener {
  void OnTail(uint64_t, uint64_t, double) override {}
  void OnFinished(uint64_t, uint64_t mb, const absl::Status& s) override { finished[mb] = s; }
  std::map<uint64_t, absl::Status> finished;
};

// Node 1's outgoing side: lets `edit` change each forward frame it sends,
// and keeps every sketch answer sent.
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
    if (frame.header.direction() == proto::DIRECTION_SKETCH) answers.push_back(frame.header);
    inner_->Send(to, std::move(frame), std::move(done));
  }
  std::function<void(Frame&)> edit;
  std::vector<proto::FrameHeader> answers;

 private:
  std::unique_ptr<Transport> inner_;
};

// Nodes 0 (data node), 1 (stage 1), 2 (stage 2), 3 (stage 1, the
// verifier), each with its own key; every server signs and, with
// `require`, requires commitments.
class Swarm {
 public:
  explicit Swarm(bool require, std::function<void(int, StageServerOptions&)> tweak = nullptr)
      : board_(&clock_, SwitchboardOptions{}) {
    const std::vector<int> stages = {0, 1, 2, 1};
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
      o.require_commitments = require;
      if (tweak) tweak(static_cast<int>(i), o);
      servers_.push_back(std::make_unique<StageServer>(
          editing.get(), &clock_, view_.get(),
          std::map<int, StageCompute*>{{stages[i], computes_.back().get()}}, o));
      servers_.back()->Attach();
      servers_.back()->SetOriginListener(&recorder_);
      transports_.push_back(std::move(editing));
    }
  }

  std::vector<RouteHop> Route() {
    return {{keys_[0]->id(), 0}, {keys_[1]->id(), 1}, {keys_[2]->id(), 2}};
  }
  // Node 0's copy of each hop-1 frame goes to verifier node 3 as well
  // (Note [Verify-only frames]; the hop before's sampling, done here).
  void SendChecksToNode3() {
    editing_[0]->edit = [this](Frame& f) {
      if (f.header.hop_index() != 1 || f.header.has_verify()) return;
      Frame copy = f;
      copy.header.mutable_route(1)->set_node_id(keys_[3]->id().Bytes());
      copy.header.mutable_verify()->set_seed(5);
      copy.header.mutable_verify()->set_checked(keys_[1]->id().Bytes());
      transports_[0]->Send(keys_[3]->id(), std::move(copy), [](absl::Status) {});
    };
  }
  void Run(uint64_t mb) {
    ASSERT_TRUE(servers_[0]->Inject(0, mb, Route(), {}).ok());
    clock_.Advance(absl::Seconds(1));
  }

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

TEST(StageServerCommitmentTest, SignedOutputsAreCheckedAndEveryMicroBatchFinishes) {
  Swarm swarm(/*require=*/true);
  for (uint64_t mb = 1; mb <= 4; ++mb) swarm.Run(mb);
  for (uint64_t mb = 1; mb <= 4; ++mb) {
    ASSERT_EQ(swarm.recorder_.finished.count(mb), 1u) << mb;
    EXPECT_TRUE(swarm.recorder_.finished[mb].ok()) << swarm.recorder_.finished[mb];
  }
  // Hop 1's forwards and hop 2's tails; the data node's stage 0 signs none.
  EXPECT_EQ(swarm.servers_[0]->stats().commitments_signed, 0);
  EXPECT_EQ(swarm.servers_[1]->stats().commitments_signed, 4);
  EXPECT_EQ(swarm.servers_[2]->stats().commitments_signed, 4);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(swarm.servers_[i]->stats().commitments_refused, 0) << i;
  // Node 2 checked node 1's forwards, the data node node 2's tails.
  EXPECT_EQ(swarm.servers_[2]->stats().commitments_checked, 4);
  EXPECT_EQ(swarm.servers_[0]->stats().commitments_checked, 4);
  EXPECT_EQ(swarm.servers_[1]->stats().commitments_checked, 0);  // stage 0's output
}

TEST(StageServerCommitmentTest, AForgedOrMissingCommitmentIsRefused) {
  const auto refused_at_hop_2 = [](bool require, std::function<void(Frame&)> edit) {
    Swarm swarm(require);
    swarm.editing_[1]->edit = std::move(edit);
    swarm.Run(1);
    EXPECT_EQ(swarm.recorder_.finished.count(1), 1u);
    return swarm.servers_[2]->stats().commitments_refused;
  };
  // A hash X did not sign: the signature fails.
  EXPECT_EQ(refused_at_hop_2(true,
                             [](Frame& f) {
                               f.header.mutable_commitment()->set_output_sha256(std::string(32, 'z'));
                             }),
            1);
  // A signature by another key under X's name.
  EXPECT_EQ(refused_at_hop_2(true,
                             [](Frame& f) {
                               proto::FrameHeader& h = f.header;
                               auto other = identity::Identity::FromSeed(std::string(32, 'q'));
                               std::string producer = h.commitment().producer();
                               ASSERT_TRUE(SignCommitment(**other, h.mutable_commitment()).ok());
                               h.mutable_commitment()->set_producer(producer);
                             }),
            1);
  // X's valid commitment for another micro-batch.
  EXPECT_EQ(refused_at_hop_2(true, [](Frame& f) { f.header.mutable_commitment()->set_mb_id(9); }),
            1);
  // None: refused when required, accepted from an older peer otherwise.
  EXPECT_EQ(refused_at_hop_2(true, [](Frame& f) { f.header.clear_commitment(); }), 1);
  EXPECT_EQ(refused_at_hop_2(false, [](Frame& f) { f.header.clear_commitment(); }), 0);
  // Untouched: accepted.
  EXPECT_EQ(refused_at_hop_2(true, nullptr), 0);
}

// commitments_required_from: a frame without a commitment is refused from
// a producer it names (a member whose record says it signs), admitted from
// any other (an older peer).
TEST(StageServerCommitmentTest, CommitmentsAreRequiredOnlyFromTheProducersNamed) {
  const auto refused_at_hop_2 = [](bool node_1_signs) {
    Swarm swarm(/*require=*/false, [&](int, StageServerOptions& o) {
      PeerId node_1 = PeerId::FromPublicKey(
          identity::Identity::FromSeed(std::string(32, 'b')).value()->public_key());
      o.commitments_required_from = [node_1, node_1_signs](const PeerId& p) {
        return node_1_signs && p == node_1;
      };
    });
    swarm.editing_[1]->edit = [](Frame& f) { f.header.clear_commitment(); };
    swarm.Run(1);
    EXPECT_EQ(swarm.recorder_.finished.count(1), 1u);
    return swarm.servers_[2]->stats().commitments_refused;
  };
  EXPECT_EQ(refused_at_hop_2(true), 1);
  EXPECT_EQ(refused_at_hop_2(false), 0);
}

TEST(StageServerCommitmentTest, TheVerifiersAnswerIsSignedOverTheInputXCommittedTo) {
  Swarm swarm(/*require=*/true);
  // Node 1's commitment on hop 2's frame names the input it received.
  std::optional<proto::OutputCommitment> commitment;
  swarm.editing_[1]->edit = [&](Frame& f) {
    if (f.header.hop_index() == 2) commitment = f.header.commitment();
  };
  swarm.SendChecksToNode3();
  swarm.Run(1);
  ASSERT_TRUE(commitment.has_value());
  ASSERT_EQ(swarm.editing_[3]->answers.size(), 1u);
  const proto::SketchAnswer& a = swarm.editing_[3]->answers[0].sketch_answer();
  EXPECT_FALSE(swarm.editing_[3]->answers[0].has_commitment());
  EXPECT_EQ(a.answerer(), swarm.keys_[3]->id().Bytes());
  EXPECT_EQ(a.input_sha256(), commitment->input_sha256());
  EXPECT_TRUE(identity::VerifySignature(swarm.keys_[3]->public_key(),
                                        AnswerSigningBytes(commitment->swarm_id(), a),
                                        a.signature())
                  .ok());
  EXPECT_TRUE(VerifyCommitment(*commitment, swarm.keys_[1]->public_key()).ok());
}

// A stand-in judge for the timed computes' all-zero outputs: a fixed
// verdict, after the decoder's CRC check.
EvidenceJudge Always(bool match) {
  return [match](const WireTensor& received, const model::OutputSketch&,
                 const model::SketchCheckOptions&) -> absl::StatusOr<model::SketchVerdict> {
    if (received.meta.payload_crc32c() != common::Crc32c(received.payload)) {
      return absl::DataLossError("payload CRC-32C does not match");
    }
    model::SketchVerdict v;
    v.match = match;
    if (!match) v.reason = "stand-in mismatch";
    return v;
  };
}

TEST(StageServerCommitmentTest, TheCatcherKeepsSignedMismatchesAsEvidenceAnyoneCanCheck) {
  const SketchLimits limits{{256}};  // the timed computes' 1 KiB outputs
  Swarm swarm(/*require=*/true, [&](int i, StageServerOptions& o) {
    if (i != 2) return;
    o.output_checks.judge = Always(false);
    o.member_on_probation = [](const PeerId&) { return true; };
    o.sketch_limits = limits;
  });
  swarm.SendChecksToNode3();
  swarm.Run(1);
  swarm.Run(2);
  const PeerId x = swarm.keys_[1]->id();
  EXPECT_EQ(swarm.servers_[2]->stats().checks.by_member.at(x).mismatches, 2);
  const std::vector<Evidence> kept = swarm.servers_[2]->EvidenceAgainst(x);
  ASSERT_EQ(kept.size(), 2u);
  for (const Evidence& e : kept) {
    const std::string x_key = swarm.keys_[1]->public_key();
    const std::string y_key = swarm.keys_[3]->public_key();
    EXPECT_EQ(CheckEvidence(e, x_key, y_key, limits, Always(false)).kind,
              EvidenceVerdict::kMismatch);
    // The judge aside, every signature and hash holds: the same piece
    // under an agreeing judge is a valid match.
    EXPECT_EQ(CheckEvidence(e, x_key, y_key, limits, Always(true)).kind, EvidenceVerdict::kMatch);
    EXPECT_EQ(CheckEvidence(e, y_key, y_key, limits, Always(false)).kind,
              EvidenceVerdict::kBadXSignature);
  }
  EXPECT_TRUE(swarm.servers_[2]->EvidenceAgainst(swarm.keys_[3]->id()).empty());
}

}  // namespace
}  // namespace skipswarm::node
