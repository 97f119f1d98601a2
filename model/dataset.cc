#include "model/dataset.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/random.h"

namespace skipswarm::model {
namespace fs = std::filesystem;
namespace {

bool SkipDirEntry(const fs::path& p) {
  const std::string name = p.filename().string();
  return name.empty() || name[0] == '.' || absl::EndsWith(name, ".dat") ||
         absl::EndsWith(name, ".u8");
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read '", path, "'"));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

at::Tensor ToTensor(const std::vector<int64_t>& v, int rows, int cols) {
  return at::tensor(v, at::kLong).reshape({rows, cols});
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ListCorpusFiles(const std::vector<std::string>& paths) {
  std::vector<std::string> roots = paths;
  if (roots.empty()) roots.push_back(kDefaultCorpusDir);
  std::vector<std::string> files;
  for (const std::string& root : roots) {
    std::error_code ec;
    if (fs::is_regular_file(root, ec)) {
      files.push_back(root);
      continue;
    }
    if (!fs::is_directory(root, ec)) {
      return absl::NotFoundError(absl::StrCat("corpus path '", root,
                                              "' is neither a file nor a directory"));
    }
    fs::recursive_directory_iterator it(root, fs::directory_options::skip_permission_denied, ec);
    for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      const fs::path& p = it->path();
      if (it->is_directory(ec)) {
        if (SkipDirEntry(p) || p.filename() == "off") it.disable_recursion_pending();
        continue;
      }
      if (SkipDirEntry(p) || !it->is_regular_file(ec)) continue;
      files.push_back(p.string());
    }
    if (ec) return absl::UnavailableError(absl::StrCat("listing '", root, "': ", ec.message()));
  }
  std::sort(files.begin(), files.end());
  files.erase(std::unique(files.begin(), files.end()), files.end());
  if (files.empty()) {
    return absl::NotFoundError(absl::StrCat(
        "no corpus files found", paths.empty() ? " (is the 'fortunes' package installed?)" : ""));
  }
  return files;
}

absl::StatusOr<Corpus> LoadCorpus(const CorpusOptions& options, const Tokenizer& tokenizer) {
  if (!(options.validation_fraction >= 0 && options.validation_fraction < 1) ||
      options.chunk_bytes == 0) {
    return absl::InvalidArgumentError("validation_fraction must be in [0, 1), chunk_bytes > 0");
  }
  absl::StatusOr<std::vector<std::string>> files = ListCorpusFiles(options.paths);
  if (!files.ok()) return files.status();
  Corpus corpus;
  corpus.files = *files;
  std::string text;
  for (const std::string& f : corpus.files) {
    absl::StatusOr<std::string> content = ReadFile(f);
    if (!content.ok()) return content.status();
    text += *content;
  }
  const uint64_t threshold =
      static_cast<uint64_t>(options.validation_fraction * 1e6);
  const size_t chunks = (text.size() + options.chunk_bytes - 1) / options.chunk_bytes;
  std::vector<bool> validation(chunks, false);
  bool any = false;
  for (size_t chunk = 0; chunk < chunks; ++chunk) {
    validation[chunk] = common::MixSeed(chunk + 0x5eed) % 1000000 < threshold;
    any = any || validation[chunk];
  }
  // A small corpus may draw no validation chunk at all: hold out the last.
  if (!any && threshold > 0 && chunks >= 2) validation[chunks - 1] = true;
  for (size_t chunk = 0; chunk < chunks; ++chunk) {
    const absl::string_view piece =
        absl::string_view(text).substr(chunk * options.chunk_bytes, options.chunk_bytes);
    std::vector<int32_t> ids = tokenizer.Encode(piece);
    auto& out = validation[chunk] ? corpus.validation : corpus.train;
    out.insert(out.end(), ids.begin(), ids.end());
    (validation[chunk] ? corpus.validation_bytes : corpus.train_bytes) += piece.size();
  }
  return corpus;
}

absl::StatusOr<std::unique_ptr<MicroBatchSampler>> MicroBatchSampler::Create(
    const std::vector<int32_t>& tokens, const SamplerOptions& o) {
  if (o.samples_per_mb < 1 || o.seq_len < 1 || o.num_shards < 1 || o.shard_index < 0 ||
      o.shard_index >= o.num_shards) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sampler: need samples_per_mb >= 1, seq_len >= 1, 0 <= shard_index (", o.shard_index,
        ") < num_shards (", o.num_shards, ")"));
  }
  const size_t n = tokens.size();
  const size_t begin = n * o.shard_index / o.num_shards;
  const size_t end = n * (o.shard_index + 1) / o.num_shards;
  if (end - begin < static_cast<size_t>(o.seq_len) + 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("sampler: shard ", o.shard_index, " of ", o.num_shards, " has ",
                     end - begin, " tokens, fewer than seq_len + 1 = ", o.seq_len + 1));
  }
  return std::unique_ptr<MicroBatchSampler>(new MicroBatchSampler(tokens, o, begin, end));
}

MicroBatch MicroBatchSampler::Get(uint64_t index) const {
  const int b = options_.samples_per_mb, t = options_.seq_len;
  common::Random rng(common::MixSeed(options_.seed ^ common::MixSeed(
                                         (static_cast<uint64_t>(options_.shard_index) << 40) ^
                                         index)));
  std::vector<int64_t> x(static_cast<size_t>(b) * t), y(x.size());
  const int64_t last_start = static_cast<int64_t>(end_ - begin_) - (t + 1);
  for (int i = 0; i < b; ++i) {
    const size_t start = begin_ + static_cast<size_t>(rng.UniformInt(0, last_start));
    for (int j = 0; j < t; ++j) {
      x[i * t + j] = tokens_[start + j];
      y[i * t + j] = tokens_[start + j + 1];
    }
  }
  return {ToTensor(x, b, t), ToTensor(y, b, t)};
}

std::vector<MicroBatch> SequentialBatches(const std::vector<int32_t>& tokens, int samples_per_mb,
                                          int seq_len, int max_batches) {
  std::vector<MicroBatch> out;
  const size_t per_batch = static_cast<size_t>(samples_per_mb) * seq_len;
  for (size_t at = 0; static_cast<int>(out.size()) < max_batches &&
                      at + per_batch + 1 <= tokens.size();
       at += per_batch) {
    std::vector<int64_t> x(per_batch), y(per_batch);
    for (size_t k = 0; k < per_batch; ++k) {
      x[k] = tokens[at + k];
      y[k] = tokens[at + k + 1];
    }
    out.push_back({ToTensor(x, samples_per_mb, seq_len), ToTensor(y, samples_per_mb, seq_len)});
  }
  return out;
}

}  // namespace skipswarm::model
