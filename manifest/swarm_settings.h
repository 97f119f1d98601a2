// What a swarm manifest fixes, as the daemon's own values: the model flags
// (model/model_flags.h) plus the swarm-wide node settings. The founder
// builds its manifest from these; a joiner takes them from the manifest,
// refusing a flag it was given that says otherwise.
//
//   SwarmSettings mine{flags, preset, mbs, iterations, name, private, tls};
//   proto::SwarmManifest m = BuildManifest(mine, corpus_identity);
//   ...
//   SS_RETURN_IF_ERROR(ApplyManifest(m, IsFlagGiven, &mine));
//   // "--layers=6 but the swarm manifest says 4 (manifest 3fa2c1d0...)"
//
// Thread rule: pure functions.
#ifndef SKIPSWARM_MANIFEST_SWARM_SETTINGS_H_
#define SKIPSWARM_MANIFEST_SWARM_SETTINGS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "manifest/manifest.pb.h"
#include "model/model_flags.h"

namespace skipswarm::manifest {

struct SwarmSettings {
  model::ModelFlags model;
  std::string preset;          // --model; empty: none
  int mbs_per_iteration = 4;   // --node_mbs
  int64_t iterations = 100;    // --node_iterations
  std::string swarm_name = "skipswarm";
  bool private_swarm = false;
  bool tls = true;
  // Replica averaging (model.averaging) goes in the manifest unless this
  // is false (tests of manifests written before it existed).
  bool with_averaging = true;
  // --sign_frames: swarm-wide (SwarmManifest.sign_frames).
  bool sign_frames = false;
};

struct CorpusIdentity {
  std::string sha256;  // hex over the files' contents in ListCorpusFiles order
  uint64_t bytes = 0;
};

// Reads the corpus files (model/corpus.h ListCorpusFiles) and hashes their
// contents (not their names: a joiner may keep them elsewhere).
absl::StatusOr<CorpusIdentity> HashCorpus(const std::vector<std::string>& paths);

// The tokenizer's identity: its kind, and for sentencepiece the model
// file's sha256 (read here).
absl::StatusOr<proto::ManifestTokenizer> TokenizerIdentity(const model::TokenizerOptions& t);

// REQUIRES: settings.model.model.Validate().ok(). protocol_version and
// software_version are this build's; founder_id is set when signing.
proto::SwarmManifest BuildManifest(const SwarmSettings& settings, const CorpusIdentity& corpus,
                                   const proto::ManifestTokenizer& tokenizer);

// Replaces every swarm-wide value of `settings` with the manifest's. A flag
// `given(name)` reports as set explicitly must agree with it, else
// InvalidArgument "--NAME=VALUE but the swarm manifest says X" (the first
// disagreeing flag; the manifest's hash prefix `manifest_sha256` is named).
// The corpus paths stay the joiner's when it gave --corpus (they are local
// paths); use HashCorpus to compare the contents.
absl::Status ApplyManifest(const proto::SwarmManifest& m, absl::string_view manifest_sha256,
                           const std::function<bool(absl::string_view)>& given,
                           SwarmSettings* settings);

}  // namespace skipswarm::manifest

#endif  // SKIPSWARM_MANIFEST_SWARM_SETTINGS_H_
