#include "node/daemon/reporting/daemon_quotas.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/sim_clock.h"
#include "gtest/gtest.h"
#include "model/memory_estimate.h"

namespace skipswarm::node {
namespace {

using common::NodeId;

// The parameter bytes of the model's largest stage (P in daemon_quotas.h).
uint64_t LargestStageBytes(const model::ModelConfig& model) {
  int64_t largest = 0;
  for (int s = 0; s < model.num_stages; ++s) {
    largest = std::max(largest, model.StageParameterCount(s));
  }
  return static_cast<uint64_t>(largest) * sizeof(float);
}

// Note [Peer quotas]: 100 fresh identities, each within its own stranger
// budget (8 frames of burst), together move the shared 32 frames, not 800;
// a member is untouched.
TEST(DaemonQuotasTest, ASybilBurstOfStrangersIsBoundedInSum) {
  common::SimClock clock;
  model::ModelConfig model;
  const uint64_t frame = static_cast<uint64_t>(model::MaxFramePayloadBytes(model, 4));
  DaemonQuotas q = MakeDaemonQuotas(model, 4, &clock);
  const NodeId member = NodeId::ForName("member");
  q.members->SetMembers({member});
  int frames = 0;
  for (int i = 0; i < 100; ++i) {
    const NodeId sybil = NodeId::ForName("sybil" + std::to_string(i));
    for (int k = 0; k < 8; ++k) frames += q.pipeline->Admit(sybil, frame).ok();
  }
  EXPECT_EQ(frames, 32);
  EXPECT_EQ((q.pipeline->refusals()[{common::QuotaReason::kStrangers,
                                     common::PeerClass::kStranger}]),
            768u);
  for (int k = 0; k < 100; ++k) ASSERT_TRUE(q.pipeline->Admit(member, frame).ok());
  // Where strangers are refused outright there is no shared budget to count.
  DaemonQuotas closed = MakeDaemonQuotas(model, 4, &clock, /*members_only=*/true);
  EXPECT_FALSE(closed.pipeline->options().all_strangers.has_value());
  EXPECT_TRUE(closed.manifest->options().all_strangers.has_value());
  // Invited joiners of the manifest keep a budget of their own (Note
  // [Manifest joiners] in manifest/manifest_service.h), smaller than the
  // strangers'.
  ASSERT_TRUE(closed.manifest->options().joiners.has_value());
  EXPECT_LT(closed.manifest->options().joiners->messages_per_second,
            closed.manifest->options().all_strangers->messages_per_second);
}

// Note [Manifest joiners], with the daemon's manifest budgets: an open
// swarm's flooder holding one valid join-work identity calls continuously
// while a Sybil flood holds the strangers' budget, and an honest joiner
// with its own work, fetching once a second (its retries are >= 200 ms
// apart), is admitted every time. The proof callbacks stand for the
// service's work check (manifest_flood_test runs the real one).
TEST(DaemonQuotasTest, OneProvenIdentityCannotStarveTheManifestsJoiners) {
  common::SimClock clock;
  DaemonQuotas q = MakeDaemonQuotas(model::ModelConfig(), 4, &clock);
  common::PeerQuota& manifest = *q.manifest;
  auto proven = [] { return true; };
  int sybil = 0, flooder = 0, honest = 0;
  auto flood = [&](int calls) {
    for (int i = 0; i < calls; ++i) {
      manifest
          .AdmitKey(absl::StrCat("ipv4:10.1.", sybil / 250 % 250, ".", sybil % 250),
                    common::PeerClass::kStranger, 100)
          .IgnoreError();
      ++sybil;
    }
  };
  flood(600);  // the strangers' burst first
  constexpr int kSteps = 1000;  // 10 s of 10 ms
  for (int step = 0; step < kSteps; ++step) {
    flood(10);  // each step's refill, and more
    for (int i = 0; i < 100; ++i) {
      flooder += manifest.AdmitJoinerKey("ipv4:10.0.0.9", "work:flooder", 100, proven).ok();
    }
    if (step % 100 == 50) {
      const absl::Status s = manifest.AdmitJoinerKey("ipv4:10.0.0.7", "work:honest", 100, proven);
      EXPECT_TRUE(s.ok()) << "at step " << step << ": " << s;
      honest += s.ok();
    }
    clock.Advance(absl::Milliseconds(10));
  }
  std::printf("manifest, one proven flooder over 10 s: flooder %d admitted, honest %d of %d\n",
              flooder, honest, kSteps / 100);
  EXPECT_EQ(honest, kSteps / 100);
  EXPECT_LE(flooder, 3 + 10);  // its own burst and a call a second
  EXPECT_EQ((manifest.refusals()[{common::QuotaReason::kJoiners, common::PeerClass::kStranger}]),
            0u);
}

TEST(DaemonQuotasTest, MembersGetTheModelsBudgetAndStrangersLittle) {
  common::SimClock clock;
  model::ModelConfig model;  // the default model
  const uint64_t frame = static_cast<uint64_t>(model::MaxFramePayloadBytes(model, 4));
  DaemonQuotas q = MakeDaemonQuotas(model, 4, &clock);
  const NodeId member = NodeId::ForName("member"), stranger = NodeId::ForName("stranger");
  q.members->SetMembers({member});
  int member_frames = 0, stranger_frames = 0;
  for (int i = 0; i < 1000; ++i) {
    member_frames += q.pipeline->Admit(member, frame).ok();
    stranger_frames += q.pipeline->Admit(stranger, frame).ok();
  }
  EXPECT_EQ(member_frames, 256);  // 256 full frames of burst, then the byte rate
  EXPECT_EQ(stranger_frames, 8);
  // One second later a member moves 256 more full frames, a stranger 4.
  clock.Advance(absl::Seconds(1));
  member_frames = stranger_frames = 0;
  for (int i = 0; i < 1000; ++i) {
    member_frames += q.pipeline->Admit(member, frame).ok();
    stranger_frames += q.pipeline->Admit(stranger, frame).ok();
  }
  EXPECT_EQ(member_frames, 256);
  EXPECT_EQ(stranger_frames, 4);
  // A member that leaves the view is a stranger from then on.
  q.members->SetMembers({});
  EXPECT_EQ(q.pipeline->ClassOf(member), common::PeerClass::kStranger);
  // The manifest serves strangers by address only.
  EXPECT_TRUE(q.manifest->AdmitKey("ipv4:10.0.0.1", common::PeerClass::kStranger, 100).ok());
}

// Note [Stream opens]: a stranger that ends each pipeline stream at once
// (so every window it sends is read in refused streams) opens two, then
// one a second; a member reconnecting after failures is far from its bound.
// Pushes are not bounded so: a push is a stream, and a replica this node
// does not know yet pushes as a stranger at its push rate.
TEST(DaemonQuotasTest, AStrangerOpensFewStreamsAMemberMany) {
  common::SimClock clock;
  DaemonQuotas q = MakeDaemonQuotas(model::ModelConfig{}, 4, &clock);
  const NodeId member = NodeId::ForName("member"), stranger = NodeId::ForName("stranger");
  q.members->SetMembers({member});
  auto opened = [](common::PeerQuota& quota, const NodeId& id, int tries) {
    int n = 0;
    for (int i = 0; i < tries; ++i) n += quota.OpenStream(id).ok();  // closed at once
    return n;
  };
  EXPECT_EQ(opened(*q.pipeline, stranger, 20), 2);
  EXPECT_EQ(opened(*q.group, stranger, 20), 10);  // the message burst
  EXPECT_EQ(opened(*q.pipeline, member, 20), 20);
  clock.Advance(absl::Seconds(1));
  EXPECT_EQ(opened(*q.pipeline, stranger, 20), 0);  // one every 4 s
  EXPECT_EQ(opened(*q.group, stranger, 20), 5);
  EXPECT_EQ(opened(*q.pipeline, member, 200), 100);  // 50/s, burst 100
  clock.Advance(absl::Seconds(3));
  EXPECT_EQ(opened(*q.pipeline, stranger, 20), 1);
  // A refused opening asked again at once waits for the next (up to 4 s),
  // past the 1 s every other refusal is held at most.
  EXPECT_EQ(common::PeerQuota::HoldOf(q.pipeline->OpenStream(stranger).status()),
            absl::Seconds(4));
}

// Note [Peer quotas], newcomers: a member on probation floods frames,
// gradient pushes and state requests; it gets a quarter of a member's
// bursts and fewer streams (on the old code, a member's whole budget),
// and the member budget once vouched for.
TEST(DaemonQuotasTest, ANewcomersFloodIsBoundedUntilItIsVouchedFor) {
  common::SimClock clock;
  model::ModelConfig model;
  const uint64_t frame = static_cast<uint64_t>(model::MaxFramePayloadBytes(model, 4));
  const uint64_t stage_bytes = LargestStageBytes(model);
  DaemonQuotas q = MakeDaemonQuotas(model, 4, &clock);
  const NodeId member = NodeId::ForName("member"), newcomer = NodeId::ForName("newcomer");
  q.members->SetMembers({member, newcomer}, {newcomer});
  EXPECT_EQ(q.pipeline->ClassOf(newcomer), common::PeerClass::kNewcomer);
  EXPECT_EQ(q.pipeline->ClassOf(member), common::PeerClass::kMember);
  struct Got {
    int frames = 0, pushes = 0, states = 0, pipeline_streams = 0, group_streams = 0;
  };
  std::vector<common::PeerQuota::StreamSlot> held;
  auto flood = [&](const NodeId& id) {
    Got g;
    for (int i = 0; i < 1000; ++i) {
      g.frames += q.pipeline->Admit(id, frame).ok();
      g.pushes += q.group->Admit(id, stage_bytes).ok();  // a whole stage's gradient each
      g.states += q.state->Admit(id, 0).ok();
    }
    for (int i = 0; i < 64; ++i) {
      auto p = q.pipeline->OpenStream(id);
      auto g2 = q.group->OpenStream(id);
      if (p.ok()) {
        ++g.pipeline_streams;
        held.push_back(*std::move(p));
      }
      if (g2.ok()) {
        ++g.group_streams;
        held.push_back(*std::move(g2));
      }
    }
    return g;
  };
  const Got m = flood(member), n = flood(newcomer);
  std::printf("FIGURE newcomer_flood: frames %d (member %d), gradient pushes of a stage %d "
              "(member %d), state requests %d (member %d), pipeline streams %d (member %d), "
              "group streams %d (member %d)\n",
              n.frames, m.frames, n.pushes, m.pushes, n.states, m.states, n.pipeline_streams,
              m.pipeline_streams, n.group_streams, m.group_streams);
  EXPECT_EQ(m.frames, 256);
  EXPECT_EQ(n.frames, 64);
  EXPECT_EQ(m.pushes, 64);
  EXPECT_EQ(n.pushes, 16);
  EXPECT_EQ(m.states, 40);
  EXPECT_EQ(n.states, 4);
  EXPECT_EQ(n.pipeline_streams, 2);
  EXPECT_EQ(n.group_streams, 8);
  EXPECT_GT(m.pipeline_streams, n.pipeline_streams);
  EXPECT_GT(m.group_streams, n.group_streams);
  const auto refused = q.pipeline->refusals();
  EXPECT_GT((refused.count({common::QuotaReason::kBytes, common::PeerClass::kNewcomer})
                 ? refused.at({common::QuotaReason::kBytes, common::PeerClass::kNewcomer})
                 : 0),
            0u);
  // Vouched for: a member's budget (its bucket refills to the member burst).
  held.clear();
  q.members->SetMembers({member, newcomer});
  clock.Advance(absl::Seconds(10));
  EXPECT_EQ(flood(newcomer).frames, 256);
}

// Note [Admission]: where the swarm admits selectively, a stranger gets no
// frame, push or state request at all (it got 8 frames above).
TEST(DaemonQuotasTest, MembersOnlyQuotasRefuseStrangersOutright) {
  common::SimClock clock;
  model::ModelConfig model;
  const uint64_t frame = static_cast<uint64_t>(model::MaxFramePayloadBytes(model, 4));
  DaemonQuotas q = MakeDaemonQuotas(model, 4, &clock, /*members_only=*/true);
  const NodeId member = NodeId::ForName("member"), stranger = NodeId::ForName("stranger");
  q.members->SetMembers({member});
  for (common::PeerQuota* quota : {q.pipeline.get(), q.group.get(), q.state.get()}) {
    EXPECT_TRUE(quota->Admit(member, frame).ok()) << quota->options().service;
    absl::Status refused = quota->Admit(stranger, 1);
    EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied) << refused;
    EXPECT_TRUE(absl::StrContains(refused.message(), "admits only invited or listed")) << refused;
    EXPECT_EQ(quota->OpenStream(stranger).status().code(), absl::StatusCode::kPermissionDenied);
    EXPECT_TRUE(quota->OpenStream(member).ok());
  }
  EXPECT_TRUE(q.manifest->AdmitKey("ipv4:10.0.0.1", common::PeerClass::kStranger, 100).ok());
  Metrics metrics;
  ExportQuotaRefusals(q, nullptr, &metrics);
  EXPECT_TRUE(absl::StrContains(
      metrics.Render(),
      "skipswarm_peer_quota_refusals_total{service=\"pipeline\",reason=\"not_admitted\","
      "peer_class=\"stranger\"} 2"))
      << metrics.Render();
}

// Note [Revocation]: a revoked id gets nothing from pipeline, group or state,
// in an open swarm (where a stranger gets a small budget) as in a selective
// one, and the refusal says why.
TEST(DaemonQuotasTest, RevokedIdsAreRefusedOutrightInEveryMode) {
  common::SimClock clock;
  model::ModelConfig model;
  const NodeId member = NodeId::ForName("member"), stranger = NodeId::ForName("stranger"),
               revoked = NodeId::ForName("revoked");
  for (bool members_only : {false, true}) {
    DaemonQuotas q = MakeDaemonQuotas(model, 4, &clock, members_only);
    q.members->SetMembers({member});
    q.members->SetRevokedCheck([&](const NodeId& id) { return id == revoked; });
    EXPECT_EQ(q.pipeline->ClassOf(member), common::PeerClass::kMember);
    EXPECT_EQ(q.pipeline->ClassOf(stranger), common::PeerClass::kStranger);
    EXPECT_EQ(q.pipeline->ClassOf(revoked), common::PeerClass::kRevoked);
    for (common::PeerQuota* quota : {q.pipeline.get(), q.group.get(), q.state.get()}) {
      SCOPED_TRACE(absl::StrCat(quota->options().service, " members_only=", members_only));
      EXPECT_TRUE(quota->Admit(member, 1).ok());
      // An open swarm's stranger still gets its small budget.
      EXPECT_EQ(quota->Admit(stranger, 1).ok(), !members_only);
      absl::Status refused = quota->Admit(revoked, 1);
      EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied) << refused;
      EXPECT_TRUE(absl::StrContains(refused.message(), "revoked")) << refused;
      EXPECT_EQ(quota->OpenStream(revoked).status().code(),
                absl::StatusCode::kPermissionDenied);
    }
    Metrics metrics;
    ExportQuotaRefusals(q, nullptr, &metrics);
    EXPECT_TRUE(absl::StrContains(
        metrics.Render(),
        "skipswarm_peer_quota_refusals_total{service=\"state\",reason=\"revoked\","
        "peer_class=\"revoked\"} 2"))
        << metrics.Render();
    // Cleared (the daemon does before its membership goes): a stranger again.
    q.members->SetRevokedCheck(nullptr);
    EXPECT_EQ(q.pipeline->ClassOf(revoked), common::PeerClass::kStranger);
  }
}

// Note [Paced bytes]: through a relay a member is never paused by what
// training sends (a second of full frames, a stage's state), a stranger
// is after its burst, and a stranger over many circuits is refused one.
TEST(DaemonQuotasTest, TheRelayPacesAStrangerNotAMember) {
  common::SimClock clock;
  model::ModelConfig model;
  const uint64_t frame = static_cast<uint64_t>(model::MaxFramePayloadBytes(model, 4));
  DaemonQuotas q = MakeDaemonQuotas(model, 4, &clock, /*members_only=*/true);
  const NodeId member = NodeId::ForName("member"), stranger = NodeId::ForName("stranger");
  q.members->SetMembers({member});
  for (int i = 0; i < 256; ++i) {
    ASSERT_EQ(q.relay->Pace(member, frame).value(), absl::ZeroDuration()) << i;
  }
  int stranger_frames = 0;
  while (q.relay->Pace(stranger, frame).value() == absl::ZeroDuration()) ++stranger_frames;
  EXPECT_GE(stranger_frames, 8);
  EXPECT_LT(stranger_frames, 256);
  EXPECT_EQ(q.relay->paced(), 1u);
  std::vector<common::PeerQuota::StreamSlot> circuits;
  for (int i = 0; i < 2; ++i) circuits.push_back(q.relay->OpenStream(stranger).value());
  EXPECT_EQ(q.relay->OpenStream(stranger).status().code(),
            absl::StatusCode::kResourceExhausted);
  for (int i = 0; i < 64; ++i) circuits.push_back(q.relay->OpenStream(member).value());
  EXPECT_FALSE(q.relay->OpenStream(member).ok());  // max_circuits_per_node
}

// Note [Relay budgets]: an attached member's answers share its bucket with
// its own calls through the relay, and neither pauses it: a second of full
// frames sent, and sixteen stages' states answered (chunks of 256 KiB).
TEST(DaemonQuotasTest, TheRelayNeverPacesAMemberThatCallsAndAnswers) {
  common::SimClock clock;
  model::ModelConfig model;
  const uint64_t frame = static_cast<uint64_t>(model::MaxFramePayloadBytes(model, 4));
  const uint64_t state = 7 * LargestStageBytes(model) + (1 << 20);
  DaemonQuotas q = MakeDaemonQuotas(model, 4, &clock);
  const NodeId member = NodeId::ForName("attached member");
  q.members->SetMembers({member});
  for (int i = 0; i < 256; ++i) {
    ASSERT_EQ(q.relay->Pace(member, frame).value(), absl::ZeroDuration()) << i;
  }
  constexpr uint64_t kChunk = 256 << 10;
  for (uint64_t left = 16 * state; left > 0;) {
    const uint64_t chunk = std::min(left, kChunk);
    ASSERT_EQ(q.relay->Pace(member, chunk).value(), absl::ZeroDuration()) << left;
    left -= chunk;
  }
  EXPECT_EQ(q.relay->paced(), 0u);
}

TEST(DaemonQuotasTest, RefusalsAreExportedByServiceReasonAndClass) {
  common::SimClock clock;
  DaemonQuotas q = MakeDaemonQuotas(model::ModelConfig{}, 4, &clock);
  const NodeId stranger = NodeId::ForName("stranger");
  for (int i = 0; i < 30; ++i) (void)q.group->Admit(stranger, 0);
  Metrics metrics;
  ExportQuotaRefusals(q, nullptr, &metrics);
  const std::string text = metrics.Render();
  EXPECT_TRUE(absl::StrContains(
      text,
      "skipswarm_peer_quota_refusals_total{service=\"group\",reason=\"messages\","
      "peer_class=\"stranger\"} 20"))
      << text;
  EXPECT_TRUE(absl::StrContains(text, "# TYPE skipswarm_peer_quota_refusals_total counter"));
  // Nothing was held: the daemons' quotas hold, but nobody waited for an answer here.
  EXPECT_TRUE(absl::StrContains(
      text, "skipswarm_peer_quota_held_refusals_total{service=\"group\"} 0"))
      << text;
  EXPECT_TRUE(absl::StrContains(text, "skipswarm_peer_quota_paced_total{service=\"relay\"} 0"))
      << text;
}

// Note [Refusal hold]: a repeated refusal answered after its hold counts.
TEST(DaemonQuotasTest, HeldRefusalsAreExportedByService) {
  common::SimClock clock;
  DaemonQuotas q = MakeDaemonQuotas(model::ModelConfig{}, 4, &clock);
  const NodeId stranger = NodeId::ForName("stranger");
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(q.pipeline->OpenStream(stranger).ok());
  for (int i = 0; i < 3; ++i) {
    q.pipeline->AnswerAfterHold(q.pipeline->OpenStream(stranger).status(), [] {});
  }
  clock.Advance(absl::Seconds(2));  // the held answers go out
  Metrics metrics;
  ExportQuotaRefusals(q, nullptr, &metrics);
  EXPECT_TRUE(absl::StrContains(
      metrics.Render(), "skipswarm_peer_quota_held_refusals_total{service=\"pipeline\"} 2"))
      << metrics.Render();
}

}  // namespace
}  // namespace skipswarm::node
