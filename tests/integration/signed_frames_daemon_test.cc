// Note [Checkable evidence] (node/compute/evidence.h) switched on in the
// gossip daemons (--sign_frames): three GossipDaemons in one process over
// loopback gRPC (ports 0), data node d0 (stage 0), a (stage 1), b (stage
// 2). With every node signing, a signs its forwards and b its tails, the
// hop after checks each commitment against the sender's record key, and
// nothing is refused. With a not signing (its record says so, like an
// older build), b and d0 admit its unsigned frames and check b's own.
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "node/daemon/gossip/gossip_daemon.h"
#include "tests/integration/running_daemon.h"
#include "tests/integration/tiny_gossip_options.h"

namespace skipswarm::node {
namespace {

constexpr int64_t kIterations = 4;

class SignedFramesDaemonTest : public TinySwarmFolderTest {
 protected:
  SignedFramesDaemonTest() : TinySwarmFolderTest("signed-frames") {}

  GossipDaemonOptions Options(const std::string& name, std::vector<int> stages, bool sign) {
    GossipDaemonOptions o =
        TinyGossipOptions(name, std::move(stages), corpus_, "signed-frames-test");
    o.base.iterations = kIterations;
    o.base.model.checkpoint_dir = dir_ + "/ckpt-" + name;
    o.base.sign_frames = sign;
    o.stop_timeout = absl::Seconds(5);
    return o;
  }

  // The server's counters in `d`'s last report.
  static StageServerStats Last(RunningDaemon& d) {
    absl::MutexLock lock(&d.mu);
    EXPECT_FALSE(d.reports.empty());
    return d.reports.empty() ? StageServerStats{} : d.reports.back().server;
  }

  // Runs d0, a and b to the end; a signs iff `a_signs`, the others always.
  struct Run {
    StageServerStats d0, a, b;
  };
  Run Train(bool a_signs) {
    Run out;
    auto founder = LaunchFounder(Options("d0", {0}, true), /*expect_members=*/3);
    EXPECT_NE(founder, nullptr);
    if (founder == nullptr) return out;
    const std::string bootstrap = founder->daemon->gossip_address();
    auto member = [&](const std::string& name, int stage, bool sign) {
      GossipDaemonOptions o = Options(name, {stage}, sign);
      o.expect_members = 3;
      o.gossip.join = {bootstrap};
      return LaunchDaemon(o);
    };
    auto a = member("a", 1, a_signs);
    auto b = member("b", 2, true);
    EXPECT_TRUE(a && b);
    if (!a || !b) return out;
    for (RunningDaemon* d : {founder.get(), a.get(), b.get()}) {
      EXPECT_TRUE(d->finished.WaitForNotificationWithTimeout(absl::Seconds(240)));
      d->Join();
      EXPECT_TRUE(d->result.ok()) << d->result;
    }
    {
      absl::MutexLock lock(&founder->mu);
      EXPECT_EQ(founder->reports.size(), static_cast<size_t>(kIterations));
      for (const NodeIterationReport& r : founder->reports) {
        EXPECT_TRUE(r.data.has_value());
        if (!r.data.has_value()) continue;
        EXPECT_GT(r.data->completed, 0) << "iteration " << r.iteration;
        EXPECT_TRUE(std::isfinite(r.data->loss)) << "iteration " << r.iteration;
      }
    }
    out.d0 = Last(*founder);
    out.a = Last(*a);
    out.b = Last(*b);
    return out;
  }
};

TEST_F(SignedFramesDaemonTest, EverySignedFrameIsCheckedAndNoneRefused) {
  const Run r = Train(/*a_signs=*/true);
  // a's forwards (stage 1) and b's tails; stage 0's output is never signed.
  EXPECT_EQ(r.d0.commitments_signed, 0);
  EXPECT_GT(r.a.commitments_signed, 0);
  EXPECT_GT(r.b.commitments_signed, 0);
  // b checked a's, d0 b's (each frame once, or again on a re-send).
  EXPECT_GT(r.b.commitments_checked, 0);
  EXPECT_GT(r.d0.commitments_checked, 0);
  EXPECT_EQ(r.a.commitments_checked, 0);
  for (const StageServerStats* s : {&r.d0, &r.a, &r.b}) EXPECT_EQ(s->commitments_refused, 0);
  std::printf("FIGURE signed swarm: a signed %lld, b checked %lld; b signed %lld, d0 checked "
              "%lld\n",
              static_cast<long long>(r.a.commitments_signed),
              static_cast<long long>(r.b.commitments_checked),
              static_cast<long long>(r.b.commitments_signed),
              static_cast<long long>(r.d0.commitments_checked));
}

TEST_F(SignedFramesDaemonTest, AMemberWhoseRecordSaysItDoesNotSignStillTrains) {
  const Run r = Train(/*a_signs=*/false);
  EXPECT_EQ(r.a.commitments_signed, 0);
  EXPECT_EQ(r.b.commitments_checked, 0);
  EXPECT_GT(r.b.commitments_signed, 0);
  EXPECT_GT(r.d0.commitments_checked, 0);
  for (const StageServerStats* s : {&r.d0, &r.a, &r.b}) EXPECT_EQ(s->commitments_refused, 0);
}

}  // namespace
}  // namespace skipswarm::node
