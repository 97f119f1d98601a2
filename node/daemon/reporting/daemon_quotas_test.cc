#include "node/daemon/reporting/daemon_quotas.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/sim_clock.h"
#include "gtest/gtest.h"
#include "model/memory_estimate.h"

namespace skipswarm::node {
namespace {

using common::NodeId;

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
}

}  // namespace
}  // namespace skipswarm::node
