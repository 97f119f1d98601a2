#include "cli/manifest_step.h"

#include <glog/logging.h>

#include <cstdlib>
#include <functional>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/flags/internal/private_handle_accessor.h"
#include "absl/flags/reflection.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "cli/swarm_secret.h"
#include "common/real_clock.h"
#include "common/status_macros.h"
#include "identity/identity.h"
#include "identity/tls_credentials.h"
#include "manifest/bootstrap.h"
#include "manifest/join_challenge.h"
#include "manifest/join_target.h"
#include "manifest/manifest_admission.h"
#include "manifest/signed_manifest.h"
#include "manifest/swarm_file.h"
#include "manifest/swarm_settings.h"
#include "model/averaging_options.h"
#include "node/daemon/reporting/daemon_quotas.h"
#include "membership/record.h"

// Defined in gossip_command.cc.
ABSL_DECLARE_FLAG(std::string, join);
ABSL_DECLARE_FLAG(std::string, node_key_file);
ABSL_DECLARE_FLAG(bool, create_key);
ABSL_DECLARE_FLAG(bool, insecure);
ABSL_DECLARE_FLAG(std::string, swarm_name);
ABSL_DECLARE_FLAG(std::string, swarm_secret);
ABSL_DECLARE_FLAG(std::string, swarm_secret_file);

ABSL_FLAG(std::string, admission, "open",
          "Founder: who may join the swarm, written into its signed manifest: open (any node "
          "key), invite (a token from `skipswarm invite`, signed with this node's key, or an id "
          "of --allow_node_ids), allowlist (only --allow_node_ids). Joiners take it from the "
          "manifest.");
ABSL_FLAG(std::string, allow_node_ids, "",
          "Founder, with --admission=invite or allowlist: comma-separated node ids (hex, as "
          "`skipswarm keygen --show_key` prints them) admitted without an invite. With "
          "--admission=open and --probation_iterations: the hosts trusted from the start.");
ABSL_FLAG(uint32_t, join_work_bits, 0,
          "Founder of an --admission=open swarm: the proof of work each joining node key must "
          "carry, in leading zero bits of a SHA-256 bound to the key and this swarm's manifest "
          "(about 2^bits hashes per identity, one to check; at most 32). 0: none. Joiners take "
          "it from the manifest and solve it at start.");
ABSL_FLAG(uint32_t, probation_iterations, 0,
          "Founder of an --admission=open swarm: iterations a newcomer trains in its replica "
          "groups with digests matching a trusted replica's before routes may depend on it "
          "alone (docs/DESIGN.md, open swarms). 0: newcomers are trusted at once.");
ABSL_FLAG(std::string, invite, "",
          "Joiner of a swarm that admits by invitation: the invite token from its founder "
          "(ssinv1.…) or, better (argv is visible to other local users), the path of a file "
          "holding it.");
ABSL_FLAG(std::string, write_swarm_file, "",
          "Write a swarm file (swarm.json: the swarm manifest's sha256 and this node's address) "
          "here once the node listens; others join with --join=swarm.json.");

namespace skipswarm::cli {
namespace {

// Set explicitly: on the command line, or (config file) to a value other
// than its default - the rule ReadModelFlags uses for the shape flags.
bool FlagGiven(absl::string_view name) {
  const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
  return flag != nullptr &&
         (absl::flags_internal::PrivateHandleAccessor::IsSpecifiedOnCommandLine(*flag) ||
          flag->CurrentValue() != flag->DefaultValue());
}

std::string FlagText(absl::string_view name) {
  const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
  return flag ? flag->CurrentValue() : "";
}

// --swarm_secret, --swarm_secret_file or the environment (cli/swarm_secret.h).
absl::StatusOr<std::string> SwarmSecret() {
  SwarmSecretSources sources;
  sources.flag = absl::GetFlag(FLAGS_swarm_secret);
  sources.file = absl::GetFlag(FLAGS_swarm_secret_file);
  if (const char* env = std::getenv(kSwarmSecretEnv); env != nullptr) sources.env = env;
  std::string warning;
  SS_ASSIGN_OR_RETURN(std::string secret, ResolveSwarmSecret(sources, &warning));
  if (!warning.empty()) LOG(WARNING) << warning;
  return secret;
}

manifest::SwarmSettings SettingsOf(const node::NodeDaemonOptions& o,
                                   const std::string& swarm_secret) {
  manifest::SwarmSettings s;
  s.model = o.model;
  s.preset = FlagText("model");
  s.mbs_per_iteration = o.mbs_per_iteration;
  s.iterations = o.iterations;
  s.swarm_name = absl::GetFlag(FLAGS_swarm_name);
  s.private_swarm = !swarm_secret.empty();
  s.tls = !absl::GetFlag(FLAGS_insecure);
  s.sign_frames = o.sign_frames;
  return s;
}

// The node key (also what the daemon loads next; loading twice is cheap),
// or a throwaway one with --insecure.
absl::StatusOr<std::unique_ptr<identity::Identity>> LoadKey() {
  const std::string key_file = absl::GetFlag(FLAGS_node_key_file);
  if (key_file.empty()) {
    if (absl::GetFlag(FLAGS_insecure)) return identity::Identity::Generate();
    return absl::InvalidArgumentError(
        "--node_key_file is required for a gossip swarm (make one with `skipswarm keygen`), or "
        "pass --insecure for a local test swarm");
  }
  absl::StatusOr<std::unique_ptr<identity::Identity>> loaded =
      absl::GetFlag(FLAGS_create_key) ? identity::Identity::LoadOrCreate(key_file)
                                      : identity::Identity::Load(key_file);
  if (absl::IsNotFound(loaded.status())) {
    return absl::NotFoundError(absl::StrCat(
        "--node_key_file=", key_file,
        " does not exist; make one with `skipswarm keygen` or pass --create_key to create it (a "
        "new key is a new node identity)"));
  }
  return loaded;
}

}  // namespace

const char kManifestFlagsFile[] = "cli/manifest_step.cc";

absl::StatusOr<SwarmManifestStep> PrepareSwarmManifest(node::NodeDaemonOptions* o) {
  SwarmManifestStep step;
  SS_ASSIGN_OR_RETURN(step.swarm_secret, SwarmSecret());
  SS_ASSIGN_OR_RETURN(std::unique_ptr<identity::Identity> key, LoadKey());
  const std::string join = absl::GetFlag(FLAGS_join);
  manifest::SwarmSettings settings = SettingsOf(*o, step.swarm_secret);
  proto::SignedManifest signed_manifest;
  if (join.empty()) {
    // Founder. The corpus is hashed for its identity; a founder that
    // cannot read it (not a data node) leaves the hash empty.
    manifest::CorpusIdentity corpus;
    absl::StatusOr<manifest::CorpusIdentity> hashed = manifest::HashCorpus(o->model.corpus.paths);
    if (hashed.ok()) {
      corpus = *hashed;
    } else {
      LOG(WARNING) << "swarm manifest without a corpus hash: " << hashed.status().message();
    }
    SS_ASSIGN_OR_RETURN(proto::ManifestTokenizer tokenizer,
                        manifest::TokenizerIdentity(o->model.tokenizer));
    proto::SwarmManifest m = manifest::BuildManifest(settings, corpus, tokenizer);
    SS_RETURN_IF_ERROR(manifest::WriteAdmission(absl::GetFlag(FLAGS_admission),
                                                absl::GetFlag(FLAGS_allow_node_ids),
                                                m.mutable_admission()));
    SS_RETURN_IF_ERROR(manifest::WriteNewcomerCosts(absl::GetFlag(FLAGS_join_work_bits),
                                                    absl::GetFlag(FLAGS_probation_iterations),
                                                    m.mutable_admission()));
    if (m.admission().policy() != "open" && absl::GetFlag(FLAGS_node_key_file).empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--admission=", m.admission().policy(),
          " needs --node_key_file: the founder's key signs the invites and must stay the same"));
    }
    SS_ASSIGN_OR_RETURN(signed_manifest, manifest::SignManifest(m, *key));
    SS_ASSIGN_OR_RETURN(manifest::VerifiedManifest mine, manifest::VerifyManifest(signed_manifest));
    SS_ASSIGN_OR_RETURN(step.admission, manifest::AdmissionPolicyOf(mine));
    step.sha256 = manifest::Sha256Hex(signed_manifest.manifest());
    step.swarm_name = settings.swarm_name;
    step.founder_id = key->id().Hex();
    LOG(INFO) << "swarm manifest " << step.sha256 << " (founder " << key->id() << "): "
              << manifest::ManifestSummary(m);
  } else {
    step.joiner = true;
    SS_ASSIGN_OR_RETURN(manifest::JoinTargets targets, manifest::ParseJoinFlag(join));
    step.bootstrap = targets.addresses;
    // A swarm file names its swarm; an explicit --swarm_name still wins
    // (and admission tells when it is wrong).
    if (!targets.swarm_name.empty() && !FlagGiven("swarm_name")) {
      absl::SetFlag(&FLAGS_swarm_name, targets.swarm_name);
      settings.swarm_name = targets.swarm_name;
    }
    manifest::BootstrapOptions bo;
    auto clock = common::RealClock::Create();
    if (absl::GetFlag(FLAGS_insecure)) {
      bo.credentials = identity::PeerCredentials::Insecure();
    } else {
      SS_ASSIGN_OR_RETURN(bo.credentials,
                          identity::PeerCredentials::Create({key.get(), false}, clock->Now()));
    }
    bo.swarm_id = membership::DeriveSwarmId(absl::GetFlag(FLAGS_swarm_name),
                                            step.swarm_secret);
    bo.timeout = o->startup_timeout;
    // Note [Manifest joiners]: an invite lets a seed under a flood of
    // strangers tell us apart; one that does not read is named after the
    // fetch (CheckOwnAdmission), when the manifest says whether it matters.
    if (!absl::GetFlag(FLAGS_invite).empty()) {
      absl::StatusOr<proto::SignedInvite> invite =
          manifest::ReadInviteFlag(absl::GetFlag(FLAGS_invite));
      if (invite.ok()) {
        bo.proof.signed_invite = invite->SerializeAsString();
        bo.proof.node_id = key->id().Bytes();
      }
    }
    // An open swarm's seed may ask join work for our key instead.
    bo.public_key = key->public_key();
    // An allow-list swarm's seed may give a challenge for our key to sign.
    bo.signer = key.get();
    bo.backoff_seed = std::hash<std::string>{}(key->id().Bytes());
    const absl::Duration start = clock->SteadyNow();
    SS_ASSIGN_OR_RETURN(manifest::VerifiedManifest v,
                        manifest::FetchSwarmManifest(targets, bo, clock.get(), &step.join_work));
    step.fetch_time = clock->SteadyNow() - start;
    step.sha256 = v.sha256;
    step.founder_id = v.founder.Hex();
    // Before any state moves: a disagreeing flag ends the join here.
    SS_RETURN_IF_ERROR(manifest::ApplyManifest(v.manifest, v.sha256, FlagGiven, &settings));
    if (FlagGiven("corpus") && !v.manifest.data().corpus_sha256().empty()) {
      absl::StatusOr<manifest::CorpusIdentity> mine =
          manifest::HashCorpus(settings.model.corpus.paths);
      if (mine.ok() && mine->sha256 != v.manifest.data().corpus_sha256()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--corpus=", FlagText("corpus"), " holds other text than the swarm's corpus (sha256 ",
            mine->sha256.substr(0, 12), " vs the swarm manifest's ",
            v.manifest.data().corpus_sha256().substr(0, 12), ")"));
      }
    }
    // Note [Admission]: an uninvited joiner stops here, naming the cause,
    // rather than at every member's refusal.
    SS_ASSIGN_OR_RETURN(step.admission, manifest::AdmissionPolicyOf(v));
    if (FlagGiven("admission") && absl::GetFlag(FLAGS_admission) !=
                                      membership::AdmissionModeName(step.admission.mode)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--admission=", absl::GetFlag(FLAGS_admission), " but the swarm manifest says ",
          membership::AdmissionModeName(step.admission.mode), " (swarm manifest ",
          v.sha256.substr(0, 12), "); drop the flag: joiners take it from the manifest"));
    }
    SS_ASSIGN_OR_RETURN(step.invite,
                        manifest::CheckOwnAdmission(step.admission, key->id(),
                                                    absl::GetFlag(FLAGS_invite), clock->Now()));
    o->model = settings.model;
    o->mbs_per_iteration = settings.mbs_per_iteration;
    o->iterations = settings.iterations;
    o->sign_frames = settings.sign_frames;  // Note [Checkable evidence]
    // The manifest's averaging came with settings.model (ApplyManifest
    // validated it; Note [Outer steps]: every member averages alike).
    step.swarm_name = settings.swarm_name;
    signed_manifest = v.signed_manifest;
    LOG(INFO) << "swarm manifest " << v.sha256 << " from founder " << v.founder << " in "
              << step.fetch_time << ": " << manifest::ManifestSummary(v.manifest);
  }
  // Note [Checkable evidence], "Signed swarms": the founder's flag is the
  // swarm's, and every member's (a joiner's came from the manifest above).
  o->swarm_signs_frames = o->sign_frames;
  step.quota_clock = common::RealClock::Create();
  step.quota = node::MakeDaemonQuotas(o->model.model, o->model.samples_per_mb,
                                      step.quota_clock.get())
                   .manifest;
  // Note [Manifest joiners]: the key of this process's join challenges.
  SS_ASSIGN_OR_RETURN(std::string challenge_secret, manifest::NewJoinChallengeSecret());
  step.service = std::make_unique<manifest::ManifestService>(
      signed_manifest,
      membership::DeriveSwarmId(absl::GetFlag(FLAGS_swarm_name),
                                step.swarm_secret),
      step.quota, step.admission, step.quota_clock.get(), std::move(challenge_secret));
  return step;
}

absl::Status MaybeWriteSwarmFile(const SwarmManifestStep& step,
                                 const std::string& gossip_address) {
  const std::string path = absl::GetFlag(FLAGS_write_swarm_file);
  if (path.empty()) return absl::OkStatus();
  manifest::SwarmFile f;
  f.manifest_sha256 = step.sha256;
  f.swarm_name = step.swarm_name;
  f.founder_id = step.founder_id;
  f.bootstrap = {gossip_address};
  SS_RETURN_IF_ERROR(manifest::WriteSwarmFile(path, f));
  LOG(INFO) << "swarm file " << path << " written (join with --join=" << path << ")";
  return absl::OkStatus();
}

}  // namespace skipswarm::cli
