// Note [Confirmed stopping] (data_node_driver.h): a relay of a
// micro-batch's route that lies that a later hop refused it as stopping
// (Note [Stopping refusals] in node/stage/stage_server.h) does not keep
// that honest hop out of the data node's plans, and a node marked stopping
// is planned through again once it returns with a newer record.
#include <glog/logging.h>

#include <atomic>
#include <cmath>
#include <string>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/node_id.h"
#include "gtest/gtest.h"
#include "node/compute/timed_stage_compute.h"
#include "node/train/data_source.h"
#include "node/train/test_swarm.h"
#include "node/transport/forwarding_transport.h"

namespace skipswarm::node {
namespace {

// A hostile relay: while `lies` > 0 it answers its own forwards to
// `victim` itself with the refusal a stopping node gives (never sending
// them), so its honest server drops the micro-batch with a cause naming
// the victim and its abort notice carries that claim to the origin. The
// victim is honest and not stopping.
class LyingRelayTransport final : public ForwardingTransport {
 public:
  LyingRelayTransport(std::unique_ptr<Transport> inner, common::Clock* const* clock,
                      std::atomic<int>* lies, PeerId victim)
      : ForwardingTransport(std::move(inner)), clock_(clock), lies_(lies), victim_(victim) {}

  void Send(const PeerId& to, Frame frame, SendDone done) override {
    if (to == victim_ && frame.header.direction() == proto::DIRECTION_FORWARD &&
        frame.header.iteration() > 0 && lies_->fetch_sub(1) > 0) {
      const absl::Status lie = absl::ResourceExhaustedError(absl::StrCat(
          "this node is stopping after iteration ", frame.header.iteration() - 1));
      (*clock_)->RunAfter(absl::ZeroDuration(),
                          [done = std::move(done), lie]() mutable { done(lie); });
      return;
    }
    ForwardingTransport::Send(to, std::move(frame), std::move(done));
  }

 private:
  common::Clock* const* clock_;
  std::atomic<int>* lies_;
  const PeerId victim_;
};

// Nodes 0 (data), 1 (stage 1, the liar), 2 (stage 2, the victim) and any
// `more` (stage 2 replicas); `mbs` micro-batches per iteration.
struct LyingSwarm {
  explicit LyingSwarm(int more = 0, int mbs = 2) : data(2, 8, 32) {
    TestSwarmOptions o;
    o.node_stages = {{0}, {1}, {2}};
    for (int i = 0; i < more; ++i) o.node_stages.push_back({2});
    o.num_stages = 3;
    o.driver.mbs_per_iteration = mbs;
    o.driver.on_pause_change = [this](const absl::Status& s) { pauses.push_back(s); };
    o.wrap_transport = [this](int node,
                              std::unique_ptr<Transport> inner) -> std::unique_ptr<Transport> {
      if (node != 1) return inner;
      return std::make_unique<LyingRelayTransport>(std::move(inner), &clock, &lies,
                                                   common::NodeId::ForName("node2"));
    };
    swarm = std::make_unique<TestSwarm>(o, TimedComputes(), &data);
    clock = &swarm->clock();
  }
  SyntheticDataSource data;
  std::atomic<int> lies{0};
  common::Clock* clock = nullptr;
  std::vector<absl::Status> pauses;
  std::unique_ptr<TestSwarm> swarm;
};

// The liar claims the victim refused one micro-batch of iteration 1. The
// victim's record says nothing of a stop, so the claim stays unconfirmed:
// that micro-batch is dropped as an ordinary drop, counted and attributed,
// and the victim stays in the plans: iteration 1 ends within a micro-batch
// deadline, without a pause, and iteration 2 trains both micro-batches
// through the victim. On the old code the data node marked the victim
// stopping for 2 minutes and, the victim being stage 2's only replica,
// paused for that long (Run gave up after 60 s).
TEST(StoppingClaimTest, ARelaysFalseClaimExcludesNobody) {
  LyingSwarm t;
  TestSwarm& swarm = *t.swarm;
  ASSERT_TRUE(swarm.Run(1));
  t.lies = 1;
  const absl::Duration start = swarm.clock().SteadyNow();
  ASSERT_TRUE(swarm.Run(1, absl::Seconds(60))) << "the data node waited out the false claim";
  ASSERT_EQ(swarm.reports(0).size(), 2u);
  const std::optional<IterationReport>& r = swarm.reports(0)[1].data;
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(r->status.ok()) << r->status;
  EXPECT_EQ(r->completed, 1);
  EXPECT_EQ(r->dropped, 1);
  EXPECT_EQ(r->dropped_by_reason.at("stopping_unconfirmed"), 1);
  EXPECT_EQ(r->stopping_claims_unconfirmed, 1);
  EXPECT_EQ(r->rerun, 0);
  EXPECT_TRUE(t.pauses.empty()) << t.pauses.front();
  EXPECT_LE(r->elapsed, absl::Seconds(30));
  ASSERT_TRUE(swarm.Run(1, absl::Seconds(60)));
  const std::optional<IterationReport>& next = swarm.reports(0)[2].data;
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->completed, 2);
  EXPECT_EQ(next->dropped, 0);
  ASSERT_EQ(swarm.reports(2).size(), 3u);
  EXPECT_EQ(swarm.reports(2)[2].stages.at(2).visits_here, 2);
  EXPECT_TRUE(swarm.driver(0)->paused().ok());
  LOG(INFO) << "false claim: iteration 1 took " << r->elapsed << " ("
            << (swarm.clock().SteadyNow() - start) << " for iterations 1-2)";
}

// The same relayed claim about a node whose own record in the data node's
// view says it stops after iteration 0 is confirmed (a relay passing on a
// genuine refusal): the micro-batch is re-run through the other replica of
// stage 2 and the victim stays out of the data node's later plans (Note
// [Stopping drops]), as before.
TEST(StoppingClaimTest, AClaimItsRecordConfirmsIsActedOn) {
  LyingSwarm t(/*more=*/1, /*mbs=*/4);
  TestSwarm& swarm = *t.swarm;
  ASSERT_TRUE(swarm.Run(1));
  swarm.SetStoppingInView(0, 2, 0);
  // The liar cannot repair the refusal in flight (node 3 is not in its
  // view yet), so it drops the micro-batch with the claim.
  swarm.SetPausedInView(1, 3, true);
  t.lies = 1;
  ASSERT_TRUE(swarm.Run(2, absl::Seconds(60)));
  ASSERT_EQ(swarm.reports(0).size(), 3u);
  const std::optional<IterationReport>& r = swarm.reports(0)[1].data;
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->completed, 4);
  EXPECT_EQ(r->dropped, 0);
  EXPECT_EQ(r->rerun, 1);
  EXPECT_EQ(r->stopping_claims_unconfirmed, 0);
  ASSERT_EQ(swarm.reports(2).size(), 3u);
  EXPECT_EQ(swarm.reports(2)[2].stages.at(2).visits_here, 0);
  EXPECT_EQ(swarm.reports(3)[2].stages.at(2).visits_here, 4);
}

// Note [Confirmed stopping], the mark's end: node 2 is marked stopping
// after iteration 0 (a refusal its own record confirms, as above) and
// restarts under the same key: its newer record, which no longer says
// stopping, reaches the data node after iteration 2. From iteration 3 the
// data node plans through it again, long before the mark's 2 minutes; on
// the old code (the mark keyed by its id alone) it stayed out of every
// plan until then. While its record still says stopping, it stays out.
// The end of a marked node's case: two more iterations, well inside the
// mark's 2 min, each completing all 4 micro-batches; the marked `node`
// (stage `stage`) is planned through in both when the mark `ended`, in
// neither when it holds.
void ExpectMarkEndedOrHeld(TestSwarm& swarm, absl::Duration start, int node, int stage,
                           bool ended) {
  ASSERT_TRUE(swarm.Run(2, absl::Seconds(60)));
  ASSERT_LT(swarm.clock().SteadyNow() - start, absl::Minutes(2)) << "the mark ran out anyway";
  ASSERT_EQ(swarm.reports(0).size(), 5u);
  ASSERT_EQ(swarm.reports(node).size(), 5u);
  for (size_t i : {3u, 4u}) {
    const std::optional<IterationReport>& r = swarm.reports(0)[i].data;
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->completed, 4) << "iteration " << i;
    const int64_t visits = swarm.reports(node)[i].stages.at(stage).visits_here;
    if (ended) {
      EXPECT_GT(visits, 0) << "iteration " << i << ": node " << node << " is still marked";
    } else {
      EXPECT_EQ(visits, 0) << "iteration " << i << ": planned through a stopping node";
    }
  }
  LOG(INFO) << (ended ? "mark ended" : "still stopping") << ": node " << node
            << " visits in iteration 3: " << swarm.reports(node)[3].stages.at(stage).visits_here
            << " after " << (swarm.clock().SteadyNow() - start);
}

void MarkedNodeReturns(bool newer_record) {
  LyingSwarm t(/*more=*/1, /*mbs=*/4);
  TestSwarm& swarm = *t.swarm;
  ASSERT_TRUE(swarm.Run(1));
  swarm.SetStoppingInView(0, 2, 0);
  swarm.SetPausedInView(1, 3, true);
  t.lies = 1;
  const absl::Duration start = swarm.clock().SteadyNow();
  ASSERT_TRUE(swarm.Run(2, absl::Seconds(60)));
  ASSERT_EQ(swarm.reports(0).size(), 3u);
  ASSERT_EQ(swarm.reports(0)[1].data->rerun, 1);
  ASSERT_EQ(swarm.reports(2)[2].stages.at(2).visits_here, 0) << "not marked";
  if (newer_record) swarm.SetStoppingInView(0, 2, std::nullopt);
  swarm.SetPausedInView(1, 3, false);
  ExpectMarkEndedOrHeld(swarm, start, /*node=*/2, /*stage=*/2, /*ended=*/newer_record);
}

TEST(StoppingClaimTest, AMarkEndsWhenItsNodeReturnsWithANewerRecord) { MarkedNodeReturns(true); }

TEST(StoppingClaimTest, AMarkHoldsWhileItsRecordSaysStopping) { MarkedNodeReturns(false); }

// Note [Confirmed stopping], a mark taken on the node's own word: node 1
// (stage 1) refuses the data node's own forwards of iteration 1 as stopping
// after iteration 0 before any stopping record of it reached the data node
// (the other replica, node 2, is out of the data node's view until 1 s
// later, so the refusals are not repaired in flight but re-run). Then node
// 1 restarts under the same key and serves again: with `restart` its newer
// record, which says neither stopping nor LEFT, reaches the data node after
// iteration 2, and from iteration 3 the data node plans through it again,
// long before the mark's 2 minutes. On the old code such a mark had never
// seen the record say stopping and kept node 1 out of every plan until
// then. Without `restart` the record that arrives is its late stopping
// record, newer than the one the data node held at the refusal: the mark
// holds.
void RefusingNodeReturns(bool restart) {
  SyntheticDataSource data(2, 8, 32);
  std::atomic<int> refusals{0};
  common::Clock* clock = nullptr;
  TestSwarmOptions o;
  o.node_stages = {{0}, {1}, {1}};
  o.num_stages = 2;
  o.driver.mbs_per_iteration = 4;
  o.wrap_transport = [&](int node,
                         std::unique_ptr<Transport> inner) -> std::unique_ptr<Transport> {
    if (node != 0) return inner;
    return std::make_unique<LyingRelayTransport>(std::move(inner), &clock, &refusals,
                                                 common::NodeId::ForName("node1"));
  };
  TestSwarm swarm(o, TimedComputes(), &data);
  clock = &swarm.clock();
  ASSERT_TRUE(swarm.Run(1));
  swarm.SetPausedInView(0, 2, true);
  refusals = 4;
  const absl::Duration start = swarm.clock().SteadyNow();
  swarm.clock().RunAt(start + absl::Seconds(1), [&swarm] { swarm.SetPausedInView(0, 2, false); });
  // Iteration 2: node 1 serves again, but no newer record came: marked.
  ASSERT_TRUE(swarm.Run(2, absl::Seconds(60)));
  ASSERT_EQ(swarm.reports(0).size(), 3u);
  ASSERT_EQ(swarm.reports(0)[1].data->rerun, 4) << "node 1 did not refuse";
  ASSERT_EQ(swarm.reports(0)[1].data->stopping_claims_unconfirmed, 0);
  ASSERT_EQ(refusals.load(), 0);
  ASSERT_EQ(swarm.reports(1)[2].stages.at(1).visits_here, 0) << "not marked";
  if (restart) {
    swarm.NewRecordInView(0, 1);
  } else {
    swarm.SetStoppingInView(0, 1, 0);
  }
  ExpectMarkEndedOrHeld(swarm, start, /*node=*/1, /*stage=*/1, /*ended=*/restart);
}

TEST(StoppingClaimTest, AMarkOnItsOwnWordEndsWhenTheNodeRestarts) { RefusingNodeReturns(true); }

TEST(StoppingClaimTest, AMarkOnItsOwnWordHoldsWhenItsStoppingRecordComes) {
  RefusingNodeReturns(false);
}

}  // namespace
}  // namespace skipswarm::node
