// A member that forges its signed frames in a swarm that signs them (Note
// [Checkable evidence] in node/compute/evidence.h, "Signed swarms"): four
// GossipDaemons in one process over loopback gRPC (ports 0), data node d0
// (stage 0, the founder), a (stage 1), and two replicas of stage 2: honest
// b and mallory m. m is a real member (its signed record, its key known to
// all) whose pipeline transport (GossipDaemonOptions::wrap_transport)
// alters the tail frames it sends back to d0 after its stage server signed
// them, one forgery per micro-batch it carries (kSchedule's order), then
// sends honestly:
//   kOtherOutput   a payload byte changed: the commitment signs another output
//   kFalseInput    its signed input hash is not a's committed output (re-signed
//                  with m's own key, so only the input chain can tell)
//   kSwappedInput  a's genuine commitment of another micro-batch carried as
//                  the input commitment, bound and re-signed by m
//   kUnsigned      no commitment at all
//   kShortRoute    the route rewritten without a's hop, so m claims hop 1,
//                  whose input stage 0 never signs: no input commitment,
//                  a false input hash, re-signed (the input chain evaded)
// The catcher d0 must refuse each (INVALID_ARGUMENT, counted in its
// commitments_refused), while the honest swarm trains on with a finite loss
// and m's honest frames after the others are admitted as before: a frame
// refused for those is not evidence (an honest catcher keeps only frames
// that passed, Note [Evidence bans]), so no ban follows from them. The
// false input comes last: it is a proof (m's own signatures contradict
// each other), so d0 condemns m at once although m is trusted (this swarm
// has no probation), and the third members a and b fetch d0's proof, adopt
// the ban and route around m too. (The hostile client of hostile/ is a
// stranger with no record or key in the view, so it cannot sign as a
// member; m is a daemon for that.)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "third_party/cpp_httplib.h"
#include "identity/identity.h"
#include "identity/test_identity.h"
#include "node/compute/evidence.h"
#include "node/daemon/gossip/gossip_daemon.h"
#include "node/transport/forwarding_transport.h"
#include "node/transport/frame.h"
#include "tests/integration/running_daemon.h"
#include "tests/integration/tiny_gossip_options.h"

namespace skipswarm::node {
namespace {

// Enough for d0's ban of m to reach a and b by gossip after the false
// input (visit 6) and for their adopters to fetch d0's proof.
constexpr int64_t kIterations = 40;
constexpr char kMalloryKeySeed = 'm';

enum Forgery { kOtherOutput, kFalseInput, kSwappedInput, kUnsigned, kShortRoute, kHonest };
constexpr int kForgeries = kHonest;
// One visit each, in this order, then kHonest. The false input last: it
// gets m condemned (Note [Evidence bans]), so d0 routes nothing more to m.
constexpr Forgery kSchedule[] = {kOtherOutput, kSwappedInput, kUnsigned,
                                 kShortRoute,  kHonest,       kFalseInput};
constexpr size_t kScheduled = sizeof(kSchedule) / sizeof(kSchedule[0]);

const char* ForgeryName(int f) {
  static const char* const kNames[] = {"other_output", "false_input", "swapped_input",
                                       "unsigned", "short_route", "honest"};
  return kNames[f];
}

// What the catcher's refusal names for each forgery (Note [Checkable
// evidence]; stage_server_commitment.cc).
const char* ExpectedReason(int f) {
  static const char* const kReasons[] = {
      "the payload is not the committed output",
      "the producer's input hash is not the hop before's committed output",
      "the input commitment does not describe the hop before's visit",
      "no output commitment",
      "the route's hop 1 is not the node this origin sent the micro-batch to",
  };
  return kReasons[f];
}

// m's transport: each tail visit (iteration, micro-batch) it sends gets the
// next forgery of the schedule (a resend of the same visit the same one),
// then kHonest; every ack is kept by forgery.
class ForgingTransport final : public ForwardingTransport {
 public:
  struct Log {
    std::map<int, int64_t> sent;                    // by forgery
    std::map<int, std::vector<absl::Status>> acks;  // by forgery
  };

  ForgingTransport(std::unique_ptr<Transport> inner, Log* log, absl::Mutex* mu)
      : ForwardingTransport(std::move(inner)),
        key_(identity::TestIdentity(kMalloryKeySeed)),
        log_(log),
        mu_(mu) {}

  void Send(const PeerId& to, Frame frame, SendDone done) override {
    const proto::FrameHeader& h = frame.header;
    if (h.direction() != proto::DIRECTION_FORWARD || h.hop_index() != 0 ||
        !h.has_commitment()) {
      inner()->Send(to, std::move(frame), std::move(done));
      return;
    }
    int forgery;
    std::optional<proto::OutputCommitment> other_visit;
    {
      absl::MutexLock lock(mu_);
      auto [it, added] = visits_.try_emplace(
          {h.iteration(), h.mb_id()},
          visits_.size() < kScheduled ? kSchedule[visits_.size()] : kHonest);
      forgery = it->second;
      other_visit = last_input_commitment_;
      if (h.has_input_commitment()) last_input_commitment_ = h.input_commitment();
      ++log_->sent[forgery];
    }
    Forge(forgery, other_visit, frame);
    // The ack may come while the inner transport goes, after this object's
    // members: it reaches the log (the test's) only.
    SendDone logged = [log = log_, mu = mu_, forgery,
                       done = std::move(done)](absl::Status ack) mutable {
      {
        absl::MutexLock lock(mu);
        log->acks[forgery].push_back(ack);
      }
      done(std::move(ack));
    };
    inner()->Send(to, std::move(frame), std::move(logged));
  }

 private:
  void Forge(int forgery, const std::optional<proto::OutputCommitment>& other_visit,
             Frame& frame) {
    proto::FrameHeader& h = frame.header;
    proto::OutputCommitment* c = h.mutable_commitment();
    switch (forgery) {
      case kOtherOutput: {
        std::string bytes(frame.payload);
        bytes[bytes.size() / 2] ^= 0x01;
        frame.payload = absl::Cord(std::move(bytes));
        break;
      }
      case kFalseInput:
        c->set_input_sha256(Sha256(absl::Cord("an input a never sent")));
        Resign(c);
        break;
      case kSwappedInput:
        // The schedule's earlier visits carried a's genuine commitments.
        EXPECT_TRUE(other_visit.has_value());
        if (!other_visit.has_value()) break;
        *h.mutable_input_commitment() = *other_visit;
        c->set_input_sha256(other_visit->output_sha256());
        c->set_input_commitment_sha256(CommitmentDigest(*other_visit));
        Resign(c);
        break;
      case kUnsigned:
        h.clear_commitment();
        h.clear_input_commitment();
        break;
      case kShortRoute: {
        // [d0, a, m] -> [d0, m]: as the producer at hop 1 m owes no input
        // commitment, so it can sign any input hash.
        proto::Hop self = h.route(h.route_size() - 1);
        proto::Hop origin = h.route(0);
        h.clear_route();
        *h.add_route() = std::move(origin);
        *h.add_route() = std::move(self);
        h.clear_input_commitment();
        c->clear_input_commitment_sha256();
        c->set_hop_index(1);
        c->set_input_sha256(Sha256(absl::Cord("an input a never sent")));
        Resign(c);
        break;
      }
      default:
        return;
    }
    SealFrame(frame);  // a forger re-seals: the checksum must not be what refuses it
  }

  void Resign(proto::OutputCommitment* c) {
    EXPECT_TRUE(SignCommitment(*key_, c).ok());
  }

  const std::unique_ptr<identity::Identity> key_;  // m's own key
  Log* const log_;
  absl::Mutex* const mu_;
  std::map<std::pair<uint64_t, uint64_t>, int> visits_ ABSL_GUARDED_BY(*mu_);
  std::optional<proto::OutputCommitment> last_input_commitment_ ABSL_GUARDED_BY(*mu_);
};

class ForgedFramesTest : public TinySwarmFolderTest {
 protected:
  ForgedFramesTest() : TinySwarmFolderTest("forged-frames") {}

  GossipDaemonOptions Options(const std::string& name, int stage) {
    GossipDaemonOptions o = TinyGossipOptions(name, {stage}, corpus_, "forged-frames-test");
    o.base.iterations = kIterations;
    o.base.model.checkpoint_dir = dir_ + "/ckpt-" + name;
    o.base.sign_frames = true;
    o.base.swarm_signs_frames = true;  // as the founder's manifest says
    o.stop_timeout = absl::Seconds(5);
    o.base.metrics_port = 0;
    return o;
  }

  // The value of metric `key` (its name and labels) on `d`'s /metrics; -1
  // when absent.
  static double Gauge(RunningDaemon& d, const std::string& key) {
    httplib::Client http("127.0.0.1", d.daemon->metrics_port());
    auto res = http.Get("/metrics");
    if (!res) return -1;
    const size_t at = res->body.find("\n" + key + " ");
    if (at == std::string::npos) return -1;
    const size_t start = at + key.size() + 2;
    double v = -1;
    if (!absl::SimpleAtod(res->body.substr(start, res->body.find('\n', start) - start), &v)) {
      return -1;
    }
    return v;
  }

  static StageServerStats Last(RunningDaemon& d) {
    absl::MutexLock lock(&d.mu);
    EXPECT_FALSE(d.reports.empty());
    return d.reports.empty() ? StageServerStats{} : d.reports.back().server;
  }

  absl::Mutex mu_;
  ForgingTransport::Log log_ ABSL_GUARDED_BY(mu_);
};

TEST_F(ForgedFramesTest, EachForgeryOfASigningMemberIsRefusedAndTheSwarmTrainsOn) {
  auto d0 = LaunchFounder(Options("d0", 0), /*expect_members=*/4);
  ASSERT_NE(d0, nullptr);
  const std::string bootstrap = d0->daemon->gossip_address();
  auto member = [&](GossipDaemonOptions o) {
    o.expect_members = 4;
    o.gossip.join = {bootstrap};
    return LaunchDaemon(std::move(o));
  };
  auto a = member(Options("a", 1));
  auto b = member(Options("b", 2));
  GossipDaemonOptions mallory = Options("m", 2);
  mallory.gossip.key_file = SaveSeededKey(dir_ + "/m.key", kMalloryKeySeed);
  mallory.wrap_transport = [this](std::unique_ptr<Transport> inner) -> std::unique_ptr<Transport> {
    return std::make_unique<ForgingTransport>(std::move(inner), &log_, &mu_);
  };
  auto m = member(std::move(mallory));
  ASSERT_TRUE(a && b && m);
  // Note [Evidence bans]: d0 condemns m at its false input, and a and b
  // (not catchers: d0 is m's only hop after) adopt the ban on the proof d0
  // serves. Polled at each of d0's iterations while the daemons run.
  double excluded_d0 = -1, adopted_a = -1, adopted_b = -1;
  bool spread = false;
  while (!spread && !d0->finished.HasBeenNotified()) {
    d0->WaitForIteration(d0->LastIteration() + 1, absl::Milliseconds(100));
    excluded_d0 = Gauge(*d0, "skipswarm_verify_excluded");
    adopted_a = Gauge(*a, "skipswarm_evidence_bans_adopted_total");
    adopted_b = Gauge(*b, "skipswarm_evidence_bans_adopted_total");
    spread = excluded_d0 >= 1 && adopted_a >= 1 && adopted_b >= 1;
  }
  const double proofs_a =
      Gauge(*a, "skipswarm_evidence_pieces_checked_total{verdict=\"false_input\"}");
  const double fetches_a = Gauge(*a, "skipswarm_evidence_fetches_total");
  const int64_t spread_at = d0->LastIteration();
  for (RunningDaemon* d : {d0.get(), a.get(), b.get(), m.get()}) {
    EXPECT_TRUE(d->finished.WaitForNotificationWithTimeout(absl::Seconds(240)));
    d->Join();
    EXPECT_TRUE(d->result.ok()) << d->result;
  }

  // The honest swarm trained every iteration, on a finite loss.
  {
    absl::MutexLock lock(&d0->mu);
    EXPECT_EQ(d0->reports.size(), static_cast<size_t>(kIterations));
    for (const NodeIterationReport& r : d0->reports) {
      ASSERT_TRUE(r.data.has_value());
      EXPECT_GT(r.data->completed, 0) << "iteration " << r.iteration;
      EXPECT_TRUE(std::isfinite(r.data->loss)) << "iteration " << r.iteration;
    }
  }
  const StageServerStats s0 = Last(*d0);
  absl::MutexLock lock(&mu_);
  int64_t forged = 0;
  for (int f = 0; f < kForgeries; ++f) {
    SCOPED_TRACE(ForgeryName(f));
    // Each forgery reached d0 and was refused for what it forged.
    EXPECT_GE(log_.sent[f], 1);
    EXPECT_EQ(log_.acks[f].size(), static_cast<size_t>(log_.sent[f]));
    for (const absl::Status& ack : log_.acks[f]) {
      EXPECT_TRUE(absl::IsInvalidArgument(ack)) << ack;
      EXPECT_TRUE(absl::StrContains(ack.message(), ExpectedReason(f))) << ack;
    }
    forged += log_.sent[f];
  }
  // Counted in the catcher's refusals, one per forged frame and none other.
  EXPECT_EQ(s0.commitments_refused, forged);
  for (RunningDaemon* d : {a.get(), b.get(), m.get()}) EXPECT_EQ(Last(*d).commitments_refused, 0);
  // The false input convicted m everywhere: condemned at d0 (one of them),
  // adopted on d0's proof by a and b although m is trusted.
  EXPECT_TRUE(spread) << "by d0's iteration " << spread_at << ": d0 excluded " << excluded_d0
                      << ", a adopted " << adopted_a << " after " << fetches_a
                      << " fetch(es), b adopted " << adopted_b;
  EXPECT_EQ(excluded_d0, 1);
  EXPECT_EQ(adopted_a, 1);
  EXPECT_EQ(adopted_b, 1);
  EXPECT_GE(proofs_a, 1);
  // m's honest frames between the forgeries and the false input are
  // checked and admitted as before: those refusals convicted nobody.
  EXPECT_GE(log_.sent[kHonest], 1);
  for (const absl::Status& ack : log_.acks[kHonest]) EXPECT_TRUE(ack.ok()) << ack;
  EXPECT_GE(s0.commitments_checked, log_.sent[kHonest]);
  std::string kinds;
  for (int f = 0; f < kForgeries; ++f) {
    absl::StrAppend(&kinds, f == 0 ? "" : ", ", log_.sent[f], " ", ForgeryName(f));
  }
  if (spread) {
    std::printf("FIGURE forged frames: m's false input adopted as a ban by a and b by d0's "
                "iteration %lld of %lld\n",
                static_cast<long long>(spread_at), static_cast<long long>(kIterations));
  }
  std::printf("FIGURE forged frames: %lld forged tails (%s), d0 refused %lld, checked %lld; "
              "m's honest tails %lld, all admitted\n",
              static_cast<long long>(forged), kinds.c_str(),
              static_cast<long long>(s0.commitments_refused),
              static_cast<long long>(s0.commitments_checked),
              static_cast<long long>(log_.sent[kHonest]));
}

}  // namespace
}  // namespace skipswarm::node
