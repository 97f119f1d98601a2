#include "manifest/swarm_settings.h"

#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_join.h"
#include "manifest/signed_manifest.h"
#include "model/averaging_options.h"
#include "model/corpus.h"
#include "proto/version.h"

#include <openssl/evp.h>

namespace skipswarm::manifest {
namespace {

// Streams files through one SHA-256 (corpora can be large).
class Sha256Stream {
 public:
  Sha256Stream() : ctx_(EVP_MD_CTX_new()) { EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr); }
  ~Sha256Stream() { EVP_MD_CTX_free(ctx_); }
  void Add(const char* data, size_t n) { EVP_DigestUpdate(ctx_, data, n); }
  std::string Hex() {
    unsigned char out[32];
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx_, out, &len);
    static const char* kDigits = "0123456789abcdef";
    std::string hex;
    for (unsigned int i = 0; i < len; ++i) {
      hex += kDigits[out[i] >> 4];
      hex += kDigits[out[i] & 15];
    }
    return hex;
  }

 private:
  EVP_MD_CTX* ctx_;
};

absl::StatusOr<uint64_t> AddFile(const std::string& path, Sha256Stream* sha) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::string buf(1 << 16, '\0');
  uint64_t total = 0;
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const size_t n = static_cast<size_t>(in.gcount());
    sha->Add(buf.data(), n);
    total += n;
  }
  return total;
}

std::string Text(const std::string& v) { return v.empty() ? "(none)" : v; }
std::string Text(bool v) { return v ? "true" : "false"; }
template <typename T>
std::string Text(const T& v) {
  return absl::StrCat(v);
}

}  // namespace

absl::StatusOr<CorpusIdentity> HashCorpus(const std::vector<std::string>& paths) {
  absl::StatusOr<std::vector<std::string>> files = model::ListCorpusFiles(paths);
  if (!files.ok()) return files.status();
  Sha256Stream sha;
  CorpusIdentity id;
  for (const std::string& f : *files) {
    absl::StatusOr<uint64_t> n = AddFile(f, &sha);
    if (!n.ok()) return n.status();
    id.bytes += *n;
  }
  id.sha256 = sha.Hex();
  return id;
}

absl::StatusOr<proto::ManifestTokenizer> TokenizerIdentity(const model::TokenizerOptions& t) {
  proto::ManifestTokenizer out;
  out.set_kind(t.kind);
  if (t.kind == "sentencepiece" && !t.sp_model.empty()) {
    Sha256Stream sha;
    absl::StatusOr<uint64_t> n = AddFile(t.sp_model, &sha);
    if (!n.ok()) return n.status();
    out.set_sp_model_sha256(sha.Hex());
  }
  return out;
}

proto::SwarmManifest BuildManifest(const SwarmSettings& s, const CorpusIdentity& corpus,
                                   const proto::ManifestTokenizer& tokenizer) {
  proto::SwarmManifest m;
  m.set_format(kManifestFormat);
  m.set_protocol_version(proto::kProtocolVersion);
  m.set_software_version(proto::kSoftwareVersion);
  const model::ModelConfig& c = s.model.model;
  proto::ManifestModel* mm = m.mutable_model();
  mm->set_preset(s.preset);
  mm->set_num_layers(c.num_layers);
  mm->set_d_model(c.d_model);
  mm->set_num_heads(c.num_heads);
  mm->set_ffn_dim(c.ffn_dim);
  mm->set_vocab_size(c.vocab_size);
  mm->set_seq_len(c.seq_len);
  mm->set_num_stages(c.num_stages);
  mm->set_tie_embeddings(c.tie_embeddings);
  mm->set_norm_eps(c.norm_eps);
  mm->set_rope_theta(c.rope_theta);
  mm->set_init_seed(c.init_seed);
  mm->set_config_hash(c.ConfigHash());
  *m.mutable_tokenizer() = tokenizer;
  proto::ManifestData* d = m.mutable_data();
  for (const std::string& p : s.model.corpus.paths) d->add_corpus(p);
  d->set_corpus_sha256(corpus.sha256);
  d->set_corpus_bytes(corpus.bytes);
  d->set_validation_fraction(s.model.corpus.validation_fraction);
  d->set_samples_per_mb(s.model.samples_per_mb);
  d->set_mbs_per_iteration(s.mbs_per_iteration);
  d->set_seed(s.model.seed);
  proto::ManifestOptimizer* o = m.mutable_optimizer();
  o->set_peak_lr(s.model.optimizer.peak_lr);
  o->set_min_lr(s.model.optimizer.min_lr);
  o->set_warmup_steps(s.model.optimizer.warmup_steps);
  o->set_weight_decay(s.model.optimizer.weight_decay);
  o->set_grad_clip(s.model.optimizer.grad_clip);
  o->set_iterations(s.iterations);
  proto::ManifestAdmission* a = m.mutable_admission();
  a->set_swarm_name(s.swarm_name);
  a->set_private_swarm(s.private_swarm);
  a->set_tls(s.tls);
  m.set_sign_frames(s.sign_frames);
  if (s.with_averaging) {
    const model::AveragingOptions& avg = s.model.averaging;
    proto::ManifestAveraging* out = m.mutable_averaging();
    out->set_outer_every(avg.outer_every);
    out->set_avg_codec(model::AvgCodecName(avg.codec));
    out->set_outer_lr(avg.outer_lr);
    out->set_outer_momentum(avg.outer_momentum);
    out->set_outer_overlap(avg.overlap);
  }
  return m;
}

absl::Status ApplyManifest(const proto::SwarmManifest& m, absl::string_view manifest_sha256,
                           const std::function<bool(absl::string_view)>& given,
                           SwarmSettings* s) {
  const std::string which = absl::StrCat(
      " (swarm manifest ", manifest_sha256.substr(0, 12),
      "); drop the flag to take the swarm's value, or join another swarm");
  absl::Status first = absl::OkStatus();
  // Takes the manifest's value; a given flag must already hold it.
  auto take = [&](const char* flag, auto* field, const auto& value) {
    using T = std::decay_t<decltype(*field)>;
    const T theirs = static_cast<T>(value);
    if (first.ok() && given(flag) && !(*field == theirs)) {
      // As `skipswarm node` spells it (Note [Short flag names] in
      // common/cli/runner.h): --iterations, not --node_iterations.
      absl::string_view shown = flag;
      absl::ConsumePrefix(&shown, "node_");
      first = absl::InvalidArgumentError(absl::StrCat("--", shown, "=", Text(*field),
                                                      " but the swarm manifest says ",
                                                      Text(theirs), which));
    }
    *field = theirs;
  };
  const proto::ManifestModel& mm = m.model();
  model::ModelConfig& c = s->model.model;
  take("model", &s->preset, mm.preset());
  take("layers", &c.num_layers, mm.num_layers());
  take("d_model", &c.d_model, mm.d_model());
  take("heads", &c.num_heads, mm.num_heads());
  take("ffn", &c.ffn_dim, mm.ffn_dim());
  take("vocab", &c.vocab_size, mm.vocab_size());
  take("seq_len", &c.seq_len, mm.seq_len());
  take("stages", &c.num_stages, mm.num_stages());
  take("tie_embeddings", &c.tie_embeddings, mm.tie_embeddings());
  take("init_seed", &c.init_seed, mm.init_seed());
  c.norm_eps = mm.norm_eps();
  c.rope_theta = mm.rope_theta();
  take("tokenizer", &s->model.tokenizer.kind, m.tokenizer().kind());
  const proto::ManifestData& d = m.data();
  if (!given("corpus")) {
    s->model.corpus.paths.assign(d.corpus().begin(), d.corpus().end());
  }
  take("validation_fraction", &s->model.corpus.validation_fraction, d.validation_fraction());
  take("samples_per_mb", &s->model.samples_per_mb, d.samples_per_mb());
  take("node_mbs", &s->mbs_per_iteration, d.mbs_per_iteration());
  take("seed", &s->model.seed, d.seed());
  const proto::ManifestOptimizer& o = m.optimizer();
  take("lr", &s->model.optimizer.peak_lr, o.peak_lr());
  take("min_lr", &s->model.optimizer.min_lr, o.min_lr());
  take("warmup_steps", &s->model.optimizer.warmup_steps, o.warmup_steps());
  take("weight_decay", &s->model.optimizer.weight_decay, o.weight_decay());
  take("grad_clip", &s->model.optimizer.grad_clip, o.grad_clip());
  take("node_iterations", &s->iterations, o.iterations());
  take("swarm_name", &s->swarm_name, m.admission().swarm_name());
  s->private_swarm = m.admission().private_swarm();
  s->tls = m.admission().tls();
  // Absent in an older manifest: false, so a joiner's --sign_frames=true
  // is refused there like any other disagreeing flag.
  take("sign_frames", &s->sign_frames, m.sign_frames());
  // Averaging: a manifest written before these fields leaves ours as is.
  model::AveragingOptions& avg = s->model.averaging;
  const proto::ManifestAveraging& ma = m.averaging();
  if (ma.has_outer_every()) take("outer_every", &avg.outer_every, ma.outer_every());
  if (ma.has_outer_lr()) take("outer_lr", &avg.outer_lr, ma.outer_lr());
  if (ma.has_outer_momentum()) take("outer_momentum", &avg.outer_momentum, ma.outer_momentum());
  if (ma.has_outer_overlap()) take("outer_overlap", &avg.overlap, ma.outer_overlap());
  if (ma.has_avg_codec()) {
    absl::StatusOr<model::AvgCodecSpec> codec = model::ParseAvgCodec(ma.avg_codec());
    if (!codec.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("the swarm manifest's avg_codec '",
                                                     ma.avg_codec(), "': ", codec.status().message(),
                                                     " (upgrade skipswarm?)"));
    }
    std::string mine = model::AvgCodecName(avg.codec);
    take("avg_codec", &mine, model::AvgCodecName(*codec));
    avg.codec = *codec;
  }
  if (!first.ok()) return first;
  absl::Status averaging = model::ValidateAveraging(avg);
  if (!averaging.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the swarm manifest's averaging is not valid: ", averaging.message()));
  }
  if (mm.config_hash() != c.ConfigHash()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the swarm manifest's model hash ", mm.config_hash(), " is not its shapes' (",
        c.ConfigHash(), "): a manifest from an incompatible skipswarm build"));
  }
  absl::Status valid = c.Validate();
  if (!valid.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the swarm manifest's model is not valid: ", valid.message()));
  }
  if (m.tokenizer().kind() == "sentencepiece") {
    if (s->model.tokenizer.sp_model.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the swarm trains with a sentencepiece tokenizer (model sha256 ",
          m.tokenizer().sp_model_sha256(), "): pass --sp_model=FILE with that model"));
    }
    absl::StatusOr<proto::ManifestTokenizer> mine = TokenizerIdentity(s->model.tokenizer);
    if (!mine.ok()) return mine.status();
    if (mine->sp_model_sha256() != m.tokenizer().sp_model_sha256()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--sp_model=", s->model.tokenizer.sp_model, " has sha256 ", mine->sp_model_sha256(),
          " but the swarm manifest says ", m.tokenizer().sp_model_sha256()));
    }
  }
  return absl::OkStatus();
}

}  // namespace skipswarm::manifest
