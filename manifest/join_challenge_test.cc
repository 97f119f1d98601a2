#include "manifest/join_challenge.h"

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "identity/test_identity.h"

namespace skipswarm::manifest {
namespace {

const std::string kSecret(32, 's');

TEST(JoinChallengesTest, TakesItsOwnChallengeForTwoBucketsAndForOneSwarm) {
  JoinChallenges challenges(kSecret);
  const absl::Duration t0 = absl::Seconds(1000);
  const std::string c = challenges.Issue("swarm-a", t0);
  EXPECT_TRUE(ParseJoinChallenge(c).has_value()) << c;
  EXPECT_TRUE(challenges.Fresh(c, "swarm-a", t0));
  EXPECT_TRUE(challenges.Fresh(c, "swarm-a", t0 + kJoinChallengeBucket));
  EXPECT_FALSE(challenges.Fresh(c, "swarm-a", t0 + 2 * kJoinChallengeBucket));
  EXPECT_FALSE(challenges.Fresh(c, "swarm-a", t0 - kJoinChallengeBucket));  // from the future
  EXPECT_FALSE(challenges.Fresh(c, "swarm-b", t0));
  EXPECT_FALSE(JoinChallenges(std::string(32, 't')).Fresh(c, "swarm-a", t0));
  // The first bucket has no previous one.
  EXPECT_TRUE(challenges.Fresh(challenges.Issue("swarm-a", absl::ZeroDuration()), "swarm-a",
                               absl::Seconds(1)));
}

TEST(JoinChallengesTest, ABucketOrHashAlteredIsNotTaken) {
  JoinChallenges challenges(kSecret);
  const absl::Duration now = absl::Seconds(100);
  std::string c = challenges.Issue("swarm-a", now);
  std::string other_bucket = c;
  other_bucket[0] = other_bucket[0] == '2' ? '3' : '2';
  EXPECT_FALSE(challenges.Fresh(other_bucket, "swarm-a", now));
  std::string flipped = c;
  flipped.back() = flipped.back() == '0' ? '1' : '0';
  EXPECT_FALSE(challenges.Fresh(flipped, "swarm-a", now));
  // A forged one for the current bucket.
  EXPECT_FALSE(challenges.Fresh(absl::StrCat(c.substr(0, c.find('/')), "/", std::string(64, 'a')),
                                "swarm-a", now));
}

TEST(JoinChallengeParseTest, ParsesOnlyAWellFormedChallenge) {
  const std::string mac(64, 'a');
  ASSERT_TRUE(ParseJoinChallenge("12/" + mac).has_value());
  EXPECT_EQ(*ParseJoinChallenge("12/" + mac), 12u);
  EXPECT_EQ(*ParseJoinChallenge("18446744073709551615/" + mac), 18446744073709551615u);
  for (const std::string& bad :
       {std::string(), mac, "/" + mac, "12" + mac, "12/" + mac.substr(1), "12/" + mac + "a",
        "12/" + std::string(64, 'A'), "12/" + std::string(63, 'a') + "g", "-1/" + mac,
        "+1/" + mac, " 1/" + mac, "1 /" + mac, "18446744073709551616/" + mac,
        std::string(21, '1') + "/" + mac, "1/" + mac + std::string(1000, 'a'),
        std::string("1\0/", 3) + mac}) {
    EXPECT_FALSE(ParseJoinChallenge(bad).has_value()) << bad;
  }
}

TEST(JoinChallengeSignTest, TheSignatureBindsTheIdSwarmAndChallenge) {
  auto key = identity::TestIdentity('\x02');
  auto other = identity::TestIdentity('\x03');
  const std::string c = JoinChallenges(kSecret).Issue("swarm-a", absl::Seconds(5));
  absl::StatusOr<std::string> sig = SignJoinChallenge(*key, "swarm-a", c);
  ASSERT_TRUE(sig.ok()) << sig.status();
  const std::string id = key->id().Bytes();
  EXPECT_TRUE(
      identity::VerifySignature(key->public_key(), JoinChallengeMessage("swarm-a", id, c), *sig)
          .ok());
  EXPECT_FALSE(
      identity::VerifySignature(key->public_key(), JoinChallengeMessage("swarm-b", id, c), *sig)
          .ok());
  EXPECT_FALSE(identity::VerifySignature(
                   key->public_key(), JoinChallengeMessage("swarm-a", other->id().Bytes(), c),
                   *sig)
                   .ok());
  EXPECT_FALSE(identity::VerifySignature(key->public_key(),
                                         JoinChallengeMessage("swarm-a", id, c + "x"), *sig)
                   .ok());
  // Another key's signature of the same message.
  EXPECT_FALSE(identity::VerifySignature(other->public_key(),
                                         JoinChallengeMessage("swarm-a", id, c), *sig)
                   .ok());
}

}  // namespace
}  // namespace skipswarm::manifest
