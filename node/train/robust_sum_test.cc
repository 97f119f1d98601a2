#include "node/train/robust_sum.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace skipswarm::node {
namespace {

using common::NodeId;

struct Parts {
  std::vector<NodeId> ids;
  std::vector<std::vector<float>> data;
  std::vector<int64_t> visits;
  std::vector<PartInput> Inputs() const {
    std::vector<PartInput> in;
    for (size_t i = 0; i < ids.size(); ++i) in.push_back({ids[i], &data[i], visits[i], -1});
    return in;
  }
};

// Three honest replicas with similar gradients (seeded, deterministic).
Parts Honest(size_t n = 1000) {
  Parts p;
  for (int r = 0; r < 3; ++r) {
    p.ids.push_back(NodeId::ForName("r" + std::to_string(r)));
    p.visits.push_back(r + 2);
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = 0.01f * static_cast<float>((i * 7 + r * 3) % 17) - 0.08f;
    p.data.push_back(v);
  }
  return p;
}

RobustOptions Options(double clip_factor, double outlier_factor) {
  RobustOptions o;
  o.clip_factor = clip_factor;
  o.outlier_factor = outlier_factor;
  return o;
}

std::vector<float> PlainSum(const Parts& p) {
  std::vector<float> s = p.data[0];
  for (size_t r = 1; r < p.data.size(); ++r) {
    for (size_t i = 0; i < s.size(); ++i) s[i] += p.data[r][i];
  }
  return s;
}

TEST(RobustSumTest, HonestPartsGiveThePlainSumsBytes) {
  Parts p = Honest();
  std::vector<PartVerdict> verdicts;
  EXPECT_EQ(RobustSum(p.Inputs(), {}, &verdicts), PlainSum(p));
  EXPECT_TRUE(verdicts.empty());
}

TEST(RobustSumTest, ANonFinitePartIsLeftOutAndNamed) {
  Parts p = Honest();
  p.data[1][17] = std::numeric_limits<float>::quiet_NaN();
  p.data[1][18] = std::numeric_limits<float>::infinity();
  std::vector<PartVerdict> verdicts;
  std::vector<float> sum = RobustSum(p.Inputs(), {}, &verdicts);
  ASSERT_EQ(verdicts.size(), 1u);
  EXPECT_EQ(verdicts[0].from, p.ids[1]);
  EXPECT_EQ(verdicts[0].kind, PartVerdict::Kind::kNonFinite);
  // Divided by all visits, the sum is the mean of the two kept parts.
  const double all = p.visits[0] + p.visits[1] + p.visits[2];
  const double kept = p.visits[0] + p.visits[2];
  for (size_t i = 0; i < sum.size(); ++i) {
    ASSERT_TRUE(std::isfinite(sum[i]));
    EXPECT_NEAR(sum[i] / all, (p.data[0][i] + p.data[2][i]) / kept, 1e-6) << i;
  }
}

TEST(RobustSumTest, EveryPartNonFiniteStaysNonFinite) {
  Parts p = Honest(10);
  for (auto& d : p.data) d[3] = std::numeric_limits<float>::quiet_NaN();
  std::vector<PartVerdict> verdicts;
  std::vector<float> sum = RobustSum(p.Inputs(), {}, &verdicts);
  EXPECT_TRUE(std::isnan(sum[3]));
  EXPECT_TRUE(verdicts.empty()) << "a shared divergence is nobody's fault";
}

TEST(RobustSumTest, AScaledPartIsClippedToTheBound) {
  Parts p = Honest();
  for (float& x : p.data[2]) x *= 1e4f;
  std::vector<PartVerdict> verdicts;
  std::vector<float> sum = RobustSum(p.Inputs(), Options(8.0, 0.0), &verdicts);
  ASSERT_EQ(verdicts.size(), 1u);
  EXPECT_EQ(verdicts[0].from, p.ids[2]);
  EXPECT_EQ(verdicts[0].kind, PartVerdict::Kind::kClipped);
  EXPECT_LT(verdicts[0].bound, verdicts[0].norm / 100);
  // The clipped sum's norm is at most the honest parts' plus the bound.
  const double honest = L2Norm(p.data[0]) + L2Norm(p.data[1]);
  EXPECT_LE(L2Norm(sum), honest + verdicts[0].bound * 1.0001);
  // Without clipping the scaled part dominates.
  std::vector<PartVerdict> none;
  EXPECT_GT(L2Norm(RobustSum(p.Inputs(), Options(0.0, 0.0), &none)), 100 * honest);
  EXPECT_TRUE(none.empty());
}

TEST(RobustSumTest, ALowClaimDoesNotHideALargePart) {
  Parts p = Honest();
  for (float& x : p.data[0]) x *= 1e3f;
  std::vector<PartInput> in = p.Inputs();
  in[0].claimed_norm = 1e-6;
  std::vector<PartVerdict> verdicts;
  RobustSum(in, Options(8.0, 0.0), &verdicts);
  ASSERT_EQ(verdicts.size(), 1u);
  EXPECT_EQ(verdicts[0].from, p.ids[0]);
}

TEST(RobustSumTest, APartWithoutVisitsMustBeZeros) {
  Parts p = Honest();
  p.visits[1] = 0;
  std::vector<PartVerdict> verdicts;
  std::vector<float> sum = RobustSum(p.Inputs(), {}, &verdicts);
  ASSERT_EQ(verdicts.size(), 1u);
  EXPECT_EQ(verdicts[0].from, p.ids[1]);
  for (size_t i = 0; i < sum.size(); ++i) EXPECT_EQ(sum[i], p.data[0][i] + p.data[2][i]);
}

// Replicas of one model: visits[r] micro-batch gradients each, every one
// the shared signal plus noise `noise` times its size (seeded).
Parts Replicas(const std::vector<int64_t>& visits, double noise, size_t n = 4000) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> signal(n);
  for (float& x : signal) x = normal(rng) * 0.01f;
  Parts p;
  for (size_t r = 0; r < visits.size(); ++r) {
    p.ids.push_back(NodeId::ForName("q" + std::to_string(r)));
    p.visits.push_back(visits[r]);
    std::vector<float> v(n, 0.0f);
    for (int64_t mb = 0; mb < visits[r]; ++mb) {
      for (size_t i = 0; i < n; ++i) v[i] += signal[i] + static_cast<float>(noise) * 0.01f * normal(rng);
    }
    p.data.push_back(v);
  }
  return p;
}

double Dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

TEST(RobustSumTest, HonestNoisyReplicasWithUnequalVisitsAreUntouched) {
  for (double noise : {0.1, 1.0, 10.0}) {
    Parts p = Replicas({1, 2, 4, 8, 3}, noise);
    std::vector<PartVerdict> verdicts;
    EXPECT_EQ(RobustSum(p.Inputs(), {}, &verdicts), PlainSum(p)) << "noise " << noise;
    EXPECT_TRUE(verdicts.empty()) << DescribeVerdict(verdicts[0]);
  }
}

TEST(RobustSumTest, ASignFlippedPartInsideTheNormBoundIsPulledIn) {
  // x6, reversed: inside the norm bound (8 x the median), so only centered
  // clipping can see it. Averaged in, the group's step would be ascent.
  for (double noise : {0.3, 1.0, 3.0}) {
    Parts p = Replicas({4, 4, 4}, noise);
    std::vector<float> honest_mean = PlainSum(p);
    for (float& x : p.data[1]) x *= -6.0f;
    std::vector<PartVerdict> off;
    const std::vector<float> plain = RobustSum(p.Inputs(), Options(8.0, 0.0), &off);
    EXPECT_TRUE(off.empty()) << "the norm bound alone lets it through";
    EXPECT_LT(Dot(plain, honest_mean), 0) << "undefended: the step climbs";
    std::vector<PartVerdict> verdicts;
    const std::vector<float> sum = RobustSum(p.Inputs(), {}, &verdicts);
    ASSERT_EQ(verdicts.size(), 1u) << "noise " << noise;
    EXPECT_EQ(verdicts[0].from, p.ids[1]);
    EXPECT_EQ(verdicts[0].kind, PartVerdict::Kind::kOutlier);
    EXPECT_GT(verdicts[0].norm, 3 * verdicts[0].bound);
    // The defended step goes the honest way, at least half as far as the
    // honest parts alone.
    std::vector<float> two = p.data[0];
    for (size_t i = 0; i < two.size(); ++i) two[i] += p.data[2][i];
    EXPECT_GT(Dot(sum, two), 0.5 * Dot(two, two)) << "noise " << noise;
  }
}

TEST(RobustSumTest, TwoPartsAreNeverJudgedByTheirDistance) {
  Parts p = Replicas({4, 4}, 1.0);
  for (float& x : p.data[1]) x *= -4.0f;
  std::vector<PartVerdict> verdicts;
  EXPECT_EQ(RobustSum(p.Inputs(), {}, &verdicts), PlainSum(p));
  EXPECT_TRUE(verdicts.empty()) << "with two, neither is the outlier";
}

TEST(RobustSumTest, ABannedSendersPartIsLeftOutWhateverItHolds) {
  Parts p = Honest();
  RobustOptions options;
  options.banned = {p.ids[2]};
  std::vector<PartVerdict> verdicts;
  std::vector<float> sum = RobustSum(p.Inputs(), options, &verdicts);
  ASSERT_EQ(verdicts.size(), 1u);
  EXPECT_EQ(verdicts[0].from, p.ids[2]);
  EXPECT_EQ(verdicts[0].kind, PartVerdict::Kind::kBanned);
  const double all = p.visits[0] + p.visits[1] + p.visits[2];
  const double kept = p.visits[0] + p.visits[1];
  for (size_t i = 0; i < sum.size(); ++i) {
    EXPECT_NEAR(sum[i] / all, (p.data[0][i] + p.data[1][i]) / kept, 1e-6) << i;
  }
}

// Note [Robust averaging across subnetworks]: a stage group of pipeline
// hosts, whose parts differ by noise, and SDP workers, whose parts differ
// from the hosts' by their subnetwork's offset (`offset` of the gradient's
// size, the same for workers of one subnetwork) and by noise.
struct MixedGroup {
  Parts parts;
  RobustOptions options;  // outlier factor 6 (the daemons'), the workers marked
};

MixedGroup Mixed(int hosts, const std::vector<std::vector<int>>& workers, double offset) {
  MixedGroup m;
  m.options = Options(8.0, 6.0);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  constexpr size_t kN = 1000;
  auto random = [&](double size) {
    std::vector<float> v(kN);
    for (float& x : v) x = static_cast<float>(size * normal(rng));
    return v;
  };
  const std::vector<float> g = random(1.0);
  std::map<std::vector<int>, std::vector<float>> offsets;
  auto add = [&](const std::string& name, const std::vector<float>& shift, int64_t visits) {
    m.parts.ids.push_back(NodeId::ForName(name));
    m.parts.visits.push_back(visits);
    const std::vector<float> noise = random(0.05);
    std::vector<float> v(kN);
    for (size_t i = 0; i < kN; ++i) v[i] = static_cast<float>(visits) * (g[i] + shift[i] + noise[i]);
    m.parts.data.push_back(std::move(v));
  };
  for (int r = 0; r < hosts; ++r) add("s3r" + std::to_string(r), std::vector<float>(kN), 4);
  for (size_t w = 0; w < workers.size(); ++w) {
    if (offsets.count(workers[w]) == 0) offsets[workers[w]] = random(offset);
    add("w" + std::to_string(w), offsets[workers[w]], 2);
    m.options.subnetworks[m.parts.ids.back()] = workers[w];
  }
  return m;
}

TEST(RobustSumTest, SubnetworkPartsThatDifferByDesignAreUntouched) {
  for (const auto& workers : std::vector<std::vector<std::vector<int>>>{
           {{0, 1, 5}, {0, 3, 5}}, {{0, 1, 5}, {0, 3, 5}, {0, 3, 5}, {0, 3, 5}}}) {
    MixedGroup m = Mixed(3, workers, 0.8);
    std::vector<PartVerdict> verdicts;
    EXPECT_EQ(RobustSum(m.parts.Inputs(), m.options, &verdicts), PlainSum(m.parts));
    EXPECT_TRUE(verdicts.empty()) << DescribeVerdict(verdicts[0]);
  }
  // Judged as one class (the rule before subnetworks), both workers are
  // pulled in: their distance is their subnetworks' offset, ~11x the
  // hosts' noise.
  MixedGroup m = Mixed(3, {{0, 1, 5}, {0, 3, 5}}, 0.8);
  RobustOptions one_class = m.options;
  one_class.subnetworks.clear();
  std::vector<PartVerdict> verdicts;
  RobustSum(m.parts.Inputs(), one_class, &verdicts);
  ASSERT_EQ(verdicts.size(), 2u);
  EXPECT_EQ(verdicts[0].kind, PartVerdict::Kind::kOutlier);
}

TEST(RobustSumTest, APoisonerInAMixedSdpGroupIsStillPulledIn) {
  // A sign-flipped x8 liar as one of three pipeline hosts beside two
  // workers of different subnetworks, and as one of three workers of one
  // subnetwork beside a host and a worker of another subnetwork.
  struct Case {
    int hosts;
    std::vector<std::vector<int>> workers;
    int liar;
  };
  for (const Case& c : {Case{3, {{0, 1, 5}, {0, 3, 5}}, 1},
                        Case{1, {{0, 1, 5}, {0, 3, 5}, {0, 3, 5}, {0, 3, 5}}, 2}}) {
    MixedGroup m = Mixed(c.hosts, c.workers, 0.8);
    const int liar = c.liar;
    for (float& x : m.parts.data[liar]) x *= -8.0f;
    std::vector<PartVerdict> verdicts;
    const std::vector<float> sum = RobustSum(m.parts.Inputs(), m.options, &verdicts);
    // Only the liar is named (it may also meet the norm bound).
    ASSERT_FALSE(verdicts.empty()) << "liar " << liar;
    for (const PartVerdict& v : verdicts) EXPECT_EQ(v.from, m.parts.ids[liar]);
    EXPECT_EQ(verdicts.back().kind, PartVerdict::Kind::kOutlier) << "liar " << liar;
    // The honest parts' direction survives; without the defence (what
    // `skipswarm local --sdp` ran with before) the liar turns the step
    // into ascent.
    const std::vector<float> honest = [&] {
      Parts h = m.parts;
      h.data.erase(h.data.begin() + liar);
      return PlainSum(h);
    }();
    EXPECT_GT(Dot(sum, honest), 0.5 * Dot(honest, honest)) << "liar " << liar;
    RobustOptions off = m.options;
    off.outlier_factor = 0;
    verdicts.clear();
    EXPECT_LT(Dot(RobustSum(m.parts.Inputs(), off, &verdicts), honest), 0) << "liar " << liar;
  }
}

TEST(RobustSumTest, ALiarAmongPeersOfItsClassIsHeldToTheirNoise) {
  // Three pipeline hosts and two workers of different subnetworks; one
  // host adds a push of twice the gradient's size: beside the workers'
  // offsets it looked ordinary to the one-class rule, within its class it
  // is ~40x the noise.
  MixedGroup m = Mixed(3, {{0, 1, 5}, {0, 3, 5}}, 0.8);
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& x : m.parts.data[1]) x += static_cast<float>(4 * 2.0 * normal(rng));
  std::vector<PartVerdict> verdicts;
  RobustSum(m.parts.Inputs(), m.options, &verdicts);
  ASSERT_EQ(verdicts.size(), 1u);
  EXPECT_EQ(verdicts[0].from, m.parts.ids[1]);
  EXPECT_EQ(verdicts[0].kind, PartVerdict::Kind::kOutlier);
  RobustOptions one_class = m.options;
  one_class.subnetworks.clear();
  verdicts.clear();
  RobustSum(m.parts.Inputs(), one_class, &verdicts);
  EXPECT_TRUE(verdicts.empty()) << "the one-class rule caught it after all";
}

// Note [Newcomer weight]: a trusted replica and a newcomer beside it (2
// parts: centered clipping does not run). The newcomer sends its honest
// gradient reversed and x7.5, inside the x8 norm bound: in the plain robust
// sum it turns the step into ascent; with weight 0 the sum is the trusted
// part's mean over all visits, bit for bit; with weight w it moves the sum
// by w x its part at most.
TEST(RobustSumTest, ANewcomersPoisonedPartMovesTheSumByItsWeightAtMost) {
  Parts p = Honest();
  p.ids.resize(2);
  p.data.resize(2);
  p.visits = {3, 3};
  for (size_t i = 0; i < p.data[1].size(); ++i) p.data[1][i] = -7.5f * p.data[0][i];
  RobustOptions o = Options(8, 3);
  std::vector<PartVerdict> verdicts;
  // Without the newcomer rule the liar's part goes in whole.
  const std::vector<float> plain = RobustSum(p.Inputs(), o, &verdicts);
  double dot = 0;
  for (size_t i = 0; i < plain.size(); ++i) dot += plain[i] * p.data[0][i];
  EXPECT_LT(dot, 0);  // ascent
  EXPECT_TRUE(verdicts.empty());

  o.newcomers = {p.ids[1]};
  o.newcomer_weight = 0;
  const std::vector<float> held = RobustSum(p.Inputs(), o, &verdicts);
  ASSERT_EQ(held.size(), p.data[0].size());
  for (size_t i = 0; i < held.size(); ++i) {
    ASSERT_EQ(held[i], static_cast<float>(p.data[0][i] * 2.0)) << i;  // (3 + 3) / 3
  }
  EXPECT_TRUE(verdicts.empty());  // a policy, not an offence

  o.newcomer_weight = 0.25;
  const std::vector<float> weighted = RobustSum(p.Inputs(), o, &verdicts);
  // The trusted part fills 3/4 of the newcomer's visits, a quarter of its
  // part goes in: the newcomer moves the sum by w x (its part - its visits'
  // share of the trusted mean) and no more.
  double moved = 0, bound = 0;
  for (size_t i = 0; i < weighted.size(); ++i) {
    const double expected = p.data[0][i] * (3 + 0.75 * 3) / 3 + 0.25 * p.data[1][i];
    EXPECT_NEAR(weighted[i], expected, 1e-6) << i;
    moved += std::pow(weighted[i] - held[i], 2);
    bound += std::pow(0.25 * (p.data[1][i] - p.data[0][i]), 2);
  }
  EXPECT_LE(std::sqrt(moved), std::sqrt(bound) * (1 + 1e-5));
  EXPECT_TRUE(verdicts.empty());
}

// Newcomers alone (no trusted part with visits) and honest newcomers at
// weight 1 are summed as before: the rule only ever moves weight from a
// newcomer to trusted parts.
TEST(RobustSumTest, NewcomersWithoutATrustedPartOrAtWeightOneAreSummedAsBefore) {
  Parts p = Honest();
  RobustOptions o = Options(8, 3);
  o.newcomers = {p.ids[0], p.ids[1], p.ids[2]};
  std::vector<PartVerdict> verdicts;
  EXPECT_EQ(RobustSum(p.Inputs(), o, &verdicts), PlainSum(p));
  o.newcomers = {p.ids[1]};
  o.newcomer_weight = 1;
  EXPECT_EQ(RobustSum(p.Inputs(), o, &verdicts), PlainSum(p));
  EXPECT_TRUE(verdicts.empty());
  // A trusted part without visits is no reference: the newcomers count.
  p.visits[0] = 0;
  std::fill(p.data[0].begin(), p.data[0].end(), 0.0f);
  o.newcomers = {p.ids[1], p.ids[2]};
  o.newcomer_weight = 0;
  EXPECT_EQ(RobustSum(p.Inputs(), o, &verdicts), PlainSum(p));
}

TEST(RobustSumTest, ALiarAloneInItsSubnetworkIsJudgedAcrossClasses) {
  // Three pipeline hosts and two workers, each alone in its subnetwork (a
  // stage > 0 that both subnetworks share with the hosts). Honest, the
  // workers' offsets are left alone across classes too; a worker that
  // sign-flips x8 is pulled in, and only across classes: within its class
  // of one nothing judges it (the rule at the data stage).
  for (int liar : {-1, 3, 4}) {
    MixedGroup m = Mixed(3, {{0, 1, 5}, {0, 3, 5}}, 0.8);
    m.options.across_classes = true;
    if (liar >= 0) {
      for (float& x : m.parts.data[liar]) x *= -8.0f;
    }
    std::vector<PartVerdict> verdicts;
    const std::vector<float> sum = RobustSum(m.parts.Inputs(), m.options, &verdicts);
    if (liar < 0) {
      EXPECT_EQ(sum, PlainSum(m.parts));
      EXPECT_TRUE(verdicts.empty()) << DescribeVerdict(verdicts[0]);
      continue;
    }
    ASSERT_FALSE(verdicts.empty()) << "liar " << liar;
    for (const PartVerdict& v : verdicts) EXPECT_EQ(v.from, m.parts.ids[liar]);
    EXPECT_EQ(verdicts.back().kind, PartVerdict::Kind::kOutlier) << "liar " << liar;
    Parts h = m.parts;
    h.data.erase(h.data.begin() + liar);
    const std::vector<float> honest = PlainSum(h);
    EXPECT_GT(Dot(sum, honest), 0.5 * Dot(honest, honest)) << "liar " << liar;
    RobustOptions data_stage = m.options;
    data_stage.across_classes = false;
    verdicts.clear();
    const std::vector<float> bounded = RobustSum(m.parts.Inputs(), data_stage, &verdicts);
    for (const PartVerdict& v : verdicts) {
      EXPECT_NE(v.kind, PartVerdict::Kind::kOutlier) << DescribeVerdict(v);
    }
    EXPECT_LT(Dot(bounded, honest), 0) << "liar " << liar << ": the norm clip alone";
  }
}

TEST(RobustSumTest, AnHonestSubnetworkFarAsideIsNotPulledInAcrossClasses) {
  // Offsets of 10x the gradient: both workers are farther than 6x the
  // reference from the centre, but they still point along it.
  MixedGroup m = Mixed(3, {{0, 1, 5}, {0, 3, 5}}, 10.0);
  m.options.across_classes = true;
  std::vector<PartVerdict> verdicts;
  EXPECT_EQ(RobustSum(m.parts.Inputs(), m.options, &verdicts), PlainSum(m.parts));
  EXPECT_TRUE(verdicts.empty()) << DescribeVerdict(verdicts[0]);
}

TEST(RobustSumTest, OneClassIsNeverJudgedAcrossClasses) {
  // A pipeline stage of two replicas (a class of two, no SDP member): the
  // flag changes nothing.
  Parts p = Honest();
  p.ids.pop_back();
  p.data.pop_back();
  p.visits.pop_back();
  for (float& x : p.data[1]) x *= -8.0f;
  RobustOptions o = Options(0, 6.0);
  o.across_classes = true;
  std::vector<PartVerdict> verdicts;
  EXPECT_EQ(RobustSum(p.Inputs(), o, &verdicts), PlainSum(p));
  EXPECT_TRUE(verdicts.empty());
}

}  // namespace
}  // namespace skipswarm::node
