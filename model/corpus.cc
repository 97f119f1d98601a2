#include "model/corpus.h"

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

}  // namespace skipswarm::model
