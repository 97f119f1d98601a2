#include "manifest/swarm_settings.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace skipswarm::manifest {
namespace {

std::string TempDir(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir ? dir : "/tmp") + "/" + name;
  std::filesystem::create_directories(path);
  return path;
}

SwarmSettings Founder() {
  SwarmSettings s;
  s.model.model.num_layers = 4;
  s.model.model.num_stages = 2;
  s.model.model.d_model = 64;
  s.model.model.num_heads = 4;
  s.model.optimizer.peak_lr = 0.003;
  s.model.seed = 7;
  s.model.corpus.paths = {"/data/corpus"};
  s.iterations = 50;
  s.swarm_name = "swarm-x";
  return s;
}

proto::SwarmManifest ManifestOf(const SwarmSettings& s) {
  proto::ManifestTokenizer t;
  t.set_kind("bytes");
  return BuildManifest(s, CorpusIdentity{"ab", 3}, t);
}

auto Given(std::set<std::string> names) {
  return [names](absl::string_view n) { return names.count(std::string(n)) > 0; };
}

TEST(SwarmSettingsTest, AJoinerWithoutModelFlagsTakesEverythingFromTheManifest) {
  const proto::SwarmManifest m = ManifestOf(Founder());
  SwarmSettings joiner;  // all defaults: 12 layers, 6 stages, ...
  ASSERT_TRUE(ApplyManifest(m, "0123456789abcdef", Given({}), &joiner).ok());
  EXPECT_EQ(joiner.model.model.ConfigHash(), Founder().model.model.ConfigHash());
  EXPECT_EQ(joiner.model.model.num_layers, 4);
  EXPECT_EQ(joiner.model.optimizer.peak_lr, 0.003);
  EXPECT_EQ(joiner.model.seed, 7u);
  EXPECT_EQ(joiner.iterations, 50);
  EXPECT_EQ(joiner.swarm_name, "swarm-x");
  EXPECT_EQ(joiner.model.corpus.paths, std::vector<std::string>{"/data/corpus"});
  EXPECT_EQ(joiner.model.averaging.outer_every, 1);
}

TEST(SwarmSettingsTest, AGivenFlagThatDisagreesIsNamedWithBothValues) {
  const proto::SwarmManifest m = ManifestOf(Founder());
  SwarmSettings joiner;
  joiner.model.model.num_layers = 6;
  absl::Status s = ApplyManifest(m, "0123456789abcdef", Given({"layers"}), &joiner);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "--layers=6 but the swarm manifest says 4")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "0123456789ab")) << s;
}

TEST(SwarmSettingsTest, GivenFlagsThatAgreeAreFine) {
  const proto::SwarmManifest m = ManifestOf(Founder());
  SwarmSettings joiner = Founder();
  joiner.model.corpus.paths = {"/elsewhere/corpus"};  // local paths may differ
  EXPECT_TRUE(
      ApplyManifest(m, "x", Given({"layers", "lr", "seed", "stages", "corpus"}), &joiner).ok());
  EXPECT_EQ(joiner.model.corpus.paths, std::vector<std::string>{"/elsewhere/corpus"});
}

TEST(SwarmSettingsTest, OptimizerAndScheduleFlagsAreCheckedToo) {
  const proto::SwarmManifest m = ManifestOf(Founder());
  SwarmSettings joiner;
  joiner.iterations = 200;
  absl::Status s = ApplyManifest(m, "x", Given({"node_iterations"}), &joiner);
  EXPECT_TRUE(absl::StrContains(s.message(), "--iterations=200 but the swarm manifest says 50"))
      << s;
  joiner = SwarmSettings();
  joiner.model.optimizer.peak_lr = 0.01;
  s = ApplyManifest(m, "x", Given({"lr"}), &joiner);
  EXPECT_TRUE(absl::StrContains(s.message(), "--lr=0.01 but the swarm manifest says 0.003")) << s;
}

TEST(SwarmSettingsTest, AveragingSettingsTravelAndAreOptional) {
  SwarmSettings f = Founder();
  f.model.averaging.outer_every = 8;
  f.model.averaging.codec = *model::ParseAvgCodec("int8");
  const proto::SwarmManifest m = ManifestOf(f);
  EXPECT_TRUE(m.averaging().has_outer_every());
  SwarmSettings joiner;
  ASSERT_TRUE(ApplyManifest(m, "x", Given({}), &joiner).ok());
  EXPECT_EQ(joiner.model.averaging.outer_every, 8);
  EXPECT_EQ(model::AvgCodecName(joiner.model.averaging.codec), "int8");
  joiner.model.averaging.outer_every = 4;
  absl::Status s = ApplyManifest(m, "x", Given({"outer_every"}), &joiner);
  EXPECT_TRUE(absl::StrContains(s.message(), "--outer_every=4 but the swarm manifest says 8")) << s;
  // --outer_overlap travels too: a joiner that overlaps in a swarm that does
  // not is refused instead of applying its rounds one round late.
  EXPECT_TRUE(m.averaging().has_outer_overlap());
  SwarmSettings overlapping;
  overlapping.model.averaging.outer_every = 8;
  overlapping.model.averaging.overlap = true;
  s = ApplyManifest(m, "x", Given({"outer_overlap"}), &overlapping);
  EXPECT_TRUE(absl::StrContains(s.message(), "--outer_overlap=true but the swarm manifest says false"))
      << s;
  SwarmSettings taken;
  taken.model.averaging.overlap = true;
  ASSERT_TRUE(ApplyManifest(m, "x", Given({}), &taken).ok());
  EXPECT_FALSE(taken.model.averaging.overlap);
  // A manifest without the fields (an older founder) leaves ours.
  SwarmSettings old_founder = Founder();
  old_founder.with_averaging = false;
  SwarmSettings j2;
  j2.model.averaging.outer_every = 3;
  ASSERT_TRUE(ApplyManifest(ManifestOf(old_founder), "x", Given({}), &j2).ok());
  EXPECT_EQ(j2.model.averaging.outer_every, 3);
}

// Note [Checkable evidence] ("Signed swarms"): --sign_frames is the
// founder's, for every member.
TEST(SwarmSettingsTest, FrameSigningIsTheFoundersAndAJoinerAdoptsIt) {
  SwarmSettings f = Founder();
  f.sign_frames = true;
  const proto::SwarmManifest m = ManifestOf(f);
  EXPECT_TRUE(m.sign_frames());
  SwarmSettings joiner;
  ASSERT_TRUE(ApplyManifest(m, "x", Given({}), &joiner).ok());
  EXPECT_TRUE(joiner.sign_frames);
  SwarmSettings agreeing;
  agreeing.sign_frames = true;
  EXPECT_TRUE(ApplyManifest(m, "x", Given({"sign_frames"}), &agreeing).ok());
  // A joiner that explicitly says it will not sign is refused, by name.
  SwarmSettings refusing;
  refusing.sign_frames = false;
  absl::Status s = ApplyManifest(m, "0123456789abcdef", Given({"sign_frames"}), &refusing);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "--sign_frames=false but the swarm manifest says true"))
      << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "0123456789ab")) << s;
}

TEST(SwarmSettingsTest, AManifestWithoutFrameSigningMeansOff) {
  // A founder without the flag writes the same bytes as a manifest from
  // before the field existed: absent reads as off.
  const proto::SwarmManifest m = ManifestOf(Founder());
  EXPECT_FALSE(m.sign_frames());
  proto::SwarmManifest older = m;
  older.clear_sign_frames();
  EXPECT_EQ(older.SerializeAsString(), m.SerializeAsString());
  SwarmSettings joiner;
  joiner.sign_frames = true;  // a default that says otherwise, not given
  ASSERT_TRUE(ApplyManifest(older, "x", Given({}), &joiner).ok());
  EXPECT_FALSE(joiner.sign_frames);
  // Signing alone in a swarm that does not: refused, as any flag.
  SwarmSettings alone;
  alone.sign_frames = true;
  absl::Status s = ApplyManifest(older, "x", Given({"sign_frames"}), &alone);
  EXPECT_TRUE(absl::StrContains(s.message(), "--sign_frames=true but the swarm manifest says false"))
      << s;
}

TEST(SwarmSettingsTest, AManifestWithAnInvalidModelIsRefused) {
  proto::SwarmManifest m = ManifestOf(Founder());
  m.mutable_model()->set_num_heads(7);  // 64 % 7 != 0; the hash no longer matches either
  SwarmSettings joiner;
  EXPECT_FALSE(ApplyManifest(m, "x", Given({}), &joiner).ok());
}

TEST(SwarmSettingsTest, TheCorpusHashCoversContentsNotPaths) {
  const std::string a = TempDir("corpus_a"), b = TempDir("corpus_b");
  std::ofstream(a + "/one.txt") << "hello swarm\n";
  std::ofstream(b + "/other_name.txt") << "hello swarm\n";
  auto ha = HashCorpus({a});
  auto hb = HashCorpus({b});
  ASSERT_TRUE(ha.ok()) << ha.status();
  ASSERT_TRUE(hb.ok()) << hb.status();
  EXPECT_EQ(ha->sha256, hb->sha256);
  EXPECT_EQ(ha->bytes, 12u);
  std::ofstream(b + "/other_name.txt") << "hello Swarm\n";
  EXPECT_NE(HashCorpus({b})->sha256, ha->sha256);
}

}  // namespace
}  // namespace skipswarm::manifest
