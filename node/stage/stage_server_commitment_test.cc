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
#include "node/stage/stage_server_test_util.h"
#include "node/transport/frame.h"
#include "node/transport/inproc_transport.h"

namespace skipswarm::node {
namespace {

using common::NodeId;

// Nodes 0 (data node), 1 (stage 1), 2 (stage 2), 3 (stage 1, the
// verifier), each with its own key; every server signs and, with
// `require`, requires commitments.
class Swarm : public testing::SigningSwarm {
 public:
  explicit Swarm(bool require, std::function<void(int, StageServerOptions&)> tweak = nullptr)
      : SigningSwarm({0, 1, 2, 1}, require, std::move(tweak)) {}

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

// Note [Checkable evidence]: X's frame carries the hop before's commitment
// to X's input, bound by X's own; hop 1's carries none (stage 0 signs none).
TEST(StageServerCommitmentTest, EachSignedFrameCarriesTheHopBeforesCommitmentToItsInput) {
  Swarm swarm(/*require=*/true);
  std::vector<proto::FrameHeader> from_1, from_2;
  swarm.editing_[1]->edit = [&](Frame& f) { from_1.push_back(f.header); };
  swarm.editing_[2]->edit = [&](Frame& f) { from_2.push_back(f.header); };
  swarm.Run(1);
  ASSERT_TRUE(swarm.recorder_.finished[1].ok()) << swarm.recorder_.finished[1];
  ASSERT_EQ(from_1.size(), 1u);
  ASSERT_EQ(from_2.size(), 1u);
  EXPECT_FALSE(from_1[0].has_input_commitment());
  EXPECT_TRUE(from_1[0].commitment().input_commitment_sha256().empty());
  const proto::FrameHeader& tail = from_2[0];
  EXPECT_EQ(tail.input_commitment().SerializeAsString(), from_1[0].commitment().SerializeAsString());
  EXPECT_EQ(tail.commitment().input_commitment_sha256(), CommitmentDigest(from_1[0].commitment()));
  EXPECT_EQ(tail.commitment().input_sha256(), from_1[0].commitment().output_sha256());
  EXPECT_EQ(swarm.servers_[0]->stats().commitments_checked, 1);
  EXPECT_EQ(swarm.servers_[0]->stats().commitments_refused, 0);
}

// X = node 2 (hop 2) lies about the input chain of micro-batch 2 on its own
// key (`lie` gets the hop before's commitment on micro-batch 1's too); the
// catcher is the data node (its tails' hop after).
using Lie = std::function<void(Swarm&, Frame&, const proto::OutputCommitment& mb_1)>;
int RefusedAtTheCatcherOfHop2(Lie lie,
                              std::function<void(int, StageServerOptions&)> tweak = nullptr,
                              bool require = true) {
  Swarm swarm(require, std::move(tweak));
  std::optional<proto::OutputCommitment> mb_1_input;
  swarm.editing_[2]->edit = [&](Frame& f) {
    if (f.header.mb_id() == 1) {
      mb_1_input = f.header.input_commitment();
    } else if (lie && mb_1_input.has_value()) {
      lie(swarm, f, *mb_1_input);
    }
  };
  swarm.Run(1);
  swarm.Run(2);
  for (uint64_t mb : {1, 2}) EXPECT_EQ(swarm.recorder_.finished.count(mb), 1u) << mb;
  EXPECT_TRUE(swarm.recorder_.finished[1].ok()) << swarm.recorder_.finished[1];
  EXPECT_TRUE(mb_1_input.has_value());
  for (int i = 1; i < 3; ++i) EXPECT_EQ(swarm.servers_[i]->stats().commitments_refused, 0) << i;
  return swarm.servers_[0]->stats().commitments_refused;
}

// X re-binds `in` as its input commitment and signs again.
void Rebind(Swarm& swarm, Frame& f, const proto::OutputCommitment& in) {
  *f.header.mutable_input_commitment() = in;
  f.header.mutable_commitment()->set_input_commitment_sha256(CommitmentDigest(in));
  ASSERT_TRUE(SignCommitment(*swarm.keys_[2], f.header.mutable_commitment()).ok());
}

TEST(StageServerCommitmentTest, AFalseInputHashIsRefusedByTheCatcher) {
  // X signs an input hash other than the hop before's committed output.
  EXPECT_EQ(RefusedAtTheCatcherOfHop2([](Swarm& swarm, Frame& f, const proto::OutputCommitment&) {
              f.header.mutable_commitment()->set_input_sha256(std::string(32, 'z'));
              ASSERT_TRUE(SignCommitment(*swarm.keys_[2], f.header.mutable_commitment()).ok());
            }),
            1);
  // ... and drops the hop before's commitment that would contradict it.
  EXPECT_EQ(RefusedAtTheCatcherOfHop2([](Swarm& swarm, Frame& f, const proto::OutputCommitment&) {
              f.header.clear_input_commitment();
              f.header.mutable_commitment()->clear_input_commitment_sha256();
              f.header.mutable_commitment()->set_input_sha256(std::string(32, 'z'));
              ASSERT_TRUE(SignCommitment(*swarm.keys_[2], f.header.mutable_commitment()).ok());
            }),
            1);
  // ... or keeps it without binding it.
  EXPECT_EQ(RefusedAtTheCatcherOfHop2([](Swarm& swarm, Frame& f, const proto::OutputCommitment&) {
              f.header.mutable_commitment()->clear_input_commitment_sha256();
              ASSERT_TRUE(SignCommitment(*swarm.keys_[2], f.header.mutable_commitment()).ok());
            }),
            1);
  // ... or drops the hop before from the tail's route, so that it claims
  // hop 1, whose input (stage 0's) carries no commitment to pass on.
  EXPECT_EQ(RefusedAtTheCatcherOfHop2([](Swarm& swarm, Frame& f, const proto::OutputCommitment&) {
              const proto::Hop origin = f.header.route(0);
              const proto::Hop self = f.header.route(2);
              f.header.clear_route();
              *f.header.add_route() = origin;
              *f.header.add_route() = self;
              f.header.clear_input_commitment();
              proto::OutputCommitment* c = f.header.mutable_commitment();
              c->clear_input_commitment_sha256();
              c->set_hop_index(1);
              c->set_input_sha256(std::string(32, 'z'));
              ASSERT_TRUE(SignCommitment(*swarm.keys_[2], c).ok());
            }),
            1);
  // Untouched: accepted.
  EXPECT_EQ(RefusedAtTheCatcherOfHop2(nullptr), 0);
}

// Note [Evidence bans]: a refused false input is kept as a piece against
// its producer (node 2) and told to on_false_input (a proof: condemned at
// once, not one mismatch; without it, on_check_verdict of a mismatch); a
// frame refused for anything else keeps nothing.
struct FalseInputAtTheCatcher {
  std::vector<std::pair<PeerId, bool>> verdicts;
  std::vector<PeerId> proven;
  Swarm swarm{/*require=*/true, [this](int i, StageServerOptions& o) {
                if (i != 0) return;
                o.on_check_verdict = [this](const PeerId& x, bool match) {
                  verdicts.emplace_back(x, match);
                };
                o.on_false_input = [this](const PeerId& x) { proven.push_back(x); };
              }};
  explicit FalseInputAtTheCatcher(std::function<void(Swarm&, Frame&)> lie) {
    swarm.editing_[2]->edit = [this, lie](Frame& f) {
      if (f.header.mb_id() == 2 && f.header.has_commitment()) lie(swarm, f);
    };
    swarm.Run(1);
    swarm.Run(2);
    EXPECT_EQ(swarm.servers_[0]->stats().commitments_refused, 1);
  }
};

TEST(StageServerCommitmentTest, ARefusedFalseInputIsKeptAsEvidenceAgainstItsProducer) {
  FalseInputAtTheCatcher lied([](Swarm& swarm, Frame& f) {
    f.header.mutable_commitment()->set_input_sha256(std::string(32, 'z'));
    ASSERT_TRUE(SignCommitment(*swarm.keys_[2], f.header.mutable_commitment()).ok());
  });
  const PeerId x = lied.swarm.keys_[2]->id();
  EXPECT_EQ(lied.swarm.servers_[0]->stats().false_inputs_kept, 1);
  const std::vector<Evidence> kept = lied.swarm.servers_[0]->EvidenceAgainst(x);
  ASSERT_EQ(kept.size(), 1u);
  const EvidenceVerdict v = CheckFalseInput(kept[0], lied.swarm.keys_[2]->public_key(),
                                            lied.swarm.keys_[1]->public_key());
  EXPECT_EQ(v.kind, EvidenceVerdict::kFalseInput) << v.reason;
  EXPECT_EQ(lied.proven, std::vector<PeerId>{x});
  EXPECT_TRUE(lied.verdicts.empty());  // a proof, not a strike

  // The hop before's commitment re-signed by another key: refused, but
  // nothing proves X lied.
  FalseInputAtTheCatcher forged([](Swarm& swarm, Frame& f) {
    proto::OutputCommitment in = f.header.input_commitment();
    in.set_output_sha256(std::string(32, 'z'));
    auto other = identity::Identity::FromSeed(std::string(32, 'q'));
    ASSERT_TRUE(SignCommitment(**other, &in).ok());
    in.set_producer(f.header.route(1).node_id());
    Rebind(swarm, f, in);
  });
  EXPECT_EQ(forged.swarm.servers_[0]->stats().false_inputs_kept, 0);
  EXPECT_TRUE(forged.swarm.servers_[0]->EvidenceAgainst(x).empty());
  EXPECT_TRUE(forged.verdicts.empty());
  EXPECT_TRUE(forged.proven.empty());
}

TEST(StageServerCommitmentTest, ACarriedCommitmentByAnotherKeyOrForAnotherVisitIsRefused) {
  // The hop before's commitment re-signed by another key under its name.
  EXPECT_EQ(RefusedAtTheCatcherOfHop2([](Swarm& swarm, Frame& f, const proto::OutputCommitment&) {
              proto::OutputCommitment in = f.header.input_commitment();
              auto other = identity::Identity::FromSeed(std::string(32, 'q'));
              ASSERT_TRUE(SignCommitment(**other, &in).ok());
              in.set_producer(f.header.route(1).node_id());
              Rebind(swarm, f, in);
            }),
            1);
  // The hop before's genuine commitment of micro-batch 1 replayed on
  // micro-batch 2 (the timed computes' outputs are equal, so only the
  // visit differs).
  EXPECT_EQ(RefusedAtTheCatcherOfHop2(
                [](Swarm& swarm, Frame& f, const proto::OutputCommitment& mb_1) {
                  EXPECT_EQ(mb_1.output_sha256(), f.header.input_commitment().output_sha256());
                  EXPECT_EQ(mb_1.mb_id(), 1u);
                  Rebind(swarm, f, mb_1);
                }),
            1);
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

// An older hop before (its record says it does not sign) leaves X nothing
// to pass on: X's frames are admitted without an input commitment, while
// X's own commitment is still required.
TEST(StageServerCommitmentTest, AnUnsignedHopBeforeStillTrains) {
  const PeerId node_1 = PeerId::FromPublicKey(
      identity::Identity::FromSeed(std::string(32, 'b')).value()->public_key());
  Swarm swarm(/*require=*/false, [&](int i, StageServerOptions& o) {
    if (i == 1) o.signer = nullptr;
    o.commitments_required_from = [node_1](const PeerId& p) { return p != node_1; };
  });
  std::vector<proto::FrameHeader> tails;
  swarm.editing_[2]->edit = [&](Frame& f) { tails.push_back(f.header); };
  for (uint64_t mb = 1; mb <= 2; ++mb) swarm.Run(mb);
  for (uint64_t mb = 1; mb <= 2; ++mb) {
    ASSERT_EQ(swarm.recorder_.finished.count(mb), 1u) << mb;
    EXPECT_TRUE(swarm.recorder_.finished[mb].ok()) << swarm.recorder_.finished[mb];
  }
  ASSERT_EQ(tails.size(), 2u);
  for (const proto::FrameHeader& h : tails) {
    EXPECT_TRUE(h.has_commitment());
    EXPECT_FALSE(h.has_input_commitment());
  }
  for (int i = 0; i < 3; ++i) EXPECT_EQ(swarm.servers_[i]->stats().commitments_refused, 0) << i;
  EXPECT_EQ(swarm.servers_[0]->stats().commitments_checked, 2);
  // The same frames from a hop before that is required to sign: refused.
  EXPECT_EQ(RefusedAtTheCatcherOfHop2(
                [](Swarm& swarm, Frame& f, const proto::OutputCommitment&) {
                  f.header.clear_input_commitment();
                  f.header.mutable_commitment()->clear_input_commitment_sha256();
                  ASSERT_TRUE(SignCommitment(*swarm.keys_[2], f.header.mutable_commitment()).ok());
                },
                [&](int, StageServerOptions& o) {
                  o.commitments_required_from = [](const PeerId&) { return true; };
                },
                /*require=*/false),
            1);
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
