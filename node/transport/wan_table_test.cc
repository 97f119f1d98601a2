#include "node/transport/wan_table.h"

#include <memory>
#include <optional>

#include "common/sim_clock.h"
#include "gtest/gtest.h"
#include "node/transport/inproc_transport.h"
#include "node/transport/test_util.h"

namespace skipswarm::node {
namespace {

constexpr char kTable[] = R"(# two regions
node d0 eu
node s1 us 2e6 4e6   # capped uplink / downlink
node s2 us
link eu us 50 10e6
link us us 1 1e9
)";

TEST(WanTableTest, ParsesAndRoundTrips) {
  absl::StatusOr<WanTable> t = ParseWanTable(kTable);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->nodes.size(), 3u);
  EXPECT_EQ(t->nodes.at("s1").uplink_bytes_per_second, 2e6);
  const LinkShape* l = t->FindLink("us", "eu");
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->latency, absl::Milliseconds(50));
  EXPECT_EQ(l->bytes_per_second, 10e6);
  EXPECT_EQ(t->FindLink("eu", "eu"), nullptr);
  absl::StatusOr<WanTable> again = ParseWanTable(FormatWanTable(*t));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(FormatWanTable(*again), FormatWanTable(*t));
}

TEST(WanTableTest, ErrorsNameTheLine) {
  EXPECT_EQ(ParseWanTable("node a r\nlink r r x 1\n").status().message(),
            "WAN table line 2: bad latency or rate");
  EXPECT_EQ(ParseWanTable("node a r\nnode a q\n").status().message(),
            "WAN table line 2: node a listed twice");
  EXPECT_FALSE(ParseWanTable("wire a b\n").ok());
  EXPECT_FALSE(ParseWanTable("link a b -1 5\n").ok());
}

TEST(WanTableTest, ShapingForANodeAppliesTheTimeScale) {
  WanTable t = ParseWanTable(kTable).value();
  absl::StatusOr<WanShaping> s = WanShapingFor(t, "s1", /*time_scale=*/2);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->options.uplink_bytes_per_second, 4e6);
  EXPECT_EQ(s->options.downlink_bytes_per_second, 8e6);
  EXPECT_EQ(s->links.at("d0").latency, absl::Milliseconds(25));
  EXPECT_EQ(s->links.at("d0").bytes_per_second, 20e6);
  EXPECT_EQ(s->links.at("s2").latency, absl::Microseconds(500));
  EXPECT_TRUE(s->missing.empty());
  EXPECT_EQ(s->options.burst_bytes, 0u);  // links serialise every byte
  // d0's region has no link to itself; only other regions matter to it.
  WanShaping d0 = WanShapingFor(t, "d0", 1).value();
  EXPECT_EQ(d0.links.size(), 2u);
  EXPECT_FALSE(WanShapingFor(t, "nobody", 1).ok());
  EXPECT_FALSE(WanShapingFor(t, "d0", 0).ok());
}

TEST(WanTableTest, OperatorCapsLowerTheTable) {
  ShapingOptions o;
  o.uplink_bytes_per_second = 4e6;
  ApplyBandwidthCaps(MbpsToBytesPerSecond(8), 0, &o);  // 8 Mbit/s = 1 MB/s
  EXPECT_EQ(o.uplink_bytes_per_second, 1e6);
  EXPECT_EQ(o.downlink_bytes_per_second, 0);
  ApplyBandwidthCaps(0, MbpsToBytesPerSecond(80), &o);
  EXPECT_EQ(o.uplink_bytes_per_second, 1e6);
  EXPECT_EQ(o.downlink_bytes_per_second, 10e6);
}

// Issue 7's shaper figure through the table: 10 MB over the table's 10 MB/s,
// 50 ms eu-us link arrives after 1.05 s on the simulated clock (± 5%), and at
// time scale 10 ten times sooner.
TEST(WanTableTest, TenMegabytesOverTheTablesLinkOnTheSimulatedClock) {
  WanTable t = ParseWanTable(kTable).value();
  for (double scale : {1.0, 10.0}) {
    common::SimClock clock;
    Switchboard board(&clock, SwitchboardOptions{absl::ZeroDuration(), testutil::kTestSwarm,
                                                 absl::Seconds(60)});
    const PeerId d0 = PeerId::ForName("d0"), s2 = PeerId::ForName("s2");
    WanShaping shaping = WanShapingFor(t, "d0", scale).value();
    ShapingTransport sender(board.Attach(d0).value(), &clock, shaping.options);
    sender.SetLink(s2, shaping.links.at("s2"));
    std::unique_ptr<Transport> receiver = board.Attach(s2).value();
    std::optional<absl::Duration> arrived;
    receiver->SetFrameHandler(AdmitWith([&](const PeerId&, Frame) {
      arrived = clock.SteadyNow();
      return absl::OkStatus();
    }));
    sender.Send(s2, testutil::MakeTestFrame({d0, s2, d0}, 1, 10'000'000, 0), [](absl::Status) {});
    while (clock.RunNext()) {
    }
    ASSERT_TRUE(arrived.has_value());
    EXPECT_NEAR(absl::ToDoubleSeconds(*arrived) * scale, 1.05, 1.05 * 0.05) << scale;
  }
}

}  // namespace
}  // namespace skipswarm::node
