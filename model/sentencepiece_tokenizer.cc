#include "model/sentencepiece_tokenizer.h"

#include <dlfcn.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/sentencepiece_shim.h"

// Note [SentencePiece isolation]
// Debian 12's libsentencepiece (0.1.97) carries its own copy of
// protobuf-lite 3.14 and exports those google::protobuf symbols; libtorch
// (and gRPC) load the system libprotobuf 3.21. In one process's global
// symbol scope the two copies interpose each other: linked in either order,
// a program that uses both aborts ("compiled against version 3.14.0 ... not
// compatible with the installed version (3.21.12)") or crashes. So no
// binary links libsentencepiece. The shim libskipswarm_sentencepiece.so
// (sentencepiece_shim.cc, the only code that includes sentencepiece's
// headers) links it and is opened with dlopen(RTLD_LOCAL | RTLD_DEEPBIND):
// the shim and libsentencepiece resolve symbols in their own scope first,
// so sentencepiece uses its protobuf and the rest of the process never sees
// it. Across the boundary pass only the std types of sentencepiece_shim.h
// (same libstdc++, same allocator). The library is never dlclose'd: dlopen
// is reference counted and returns the same handle next time, and unloading
// would run sentencepiece's protobuf shutdown under live processors.
// AddressSanitizer refuses RTLD_DEEPBIND, so ASan builds have no
// SentencePiece.

namespace skipswarm::model {
namespace {

#if !defined(__SANITIZE_ADDRESS__)
std::vector<std::string> CandidatePaths(const std::string& library_path) {
  if (!library_path.empty()) return {library_path};
  std::vector<std::string> out;
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n > 0) {
    const std::string exe(buf, static_cast<size_t>(n));
    const std::string dir = exe.substr(0, exe.rfind('/') + 1);
    out.push_back(dir + kSentencePieceLibraryName);
    out.push_back(exe + ".runfiles/skipswarm/model/" + kSentencePieceLibraryName);
  }
  out.push_back(kSentencePieceLibraryName);  // LD_LIBRARY_PATH, ld.so.cache
  return out;
}
#endif

absl::StatusOr<const sp_shim::Api*> LoadApi(const std::string& library_path) {
#if defined(__SANITIZE_ADDRESS__)
  return absl::FailedPreconditionError(
      "SentencePiece is unavailable in AddressSanitizer builds (it needs RTLD_DEEPBIND; Note "
      "[SentencePiece isolation])");
#else
  std::vector<std::string> errors;
  for (const std::string& path : CandidatePaths(library_path)) {
    // Only paths with a slash are files; the bare name goes to the loader.
    if (path.find('/') != std::string::npos && access(path.c_str(), R_OK) != 0) {
      errors.push_back(absl::StrCat(path, ": not found"));
      continue;
    }
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (handle == nullptr) {
      const char* e = dlerror();
      errors.push_back(e ? e : path);
      continue;
    }
    using Entry = const sp_shim::Api* (*)();
    auto entry = reinterpret_cast<Entry>(dlsym(handle, kSkipSwarmSentencePieceApiSymbol));
    const sp_shim::Api* api = entry ? entry() : nullptr;
    if (api == nullptr || api->abi_version != sp_shim::kAbiVersion) {
      errors.push_back(absl::StrCat(path, ": not a matching ", kSentencePieceLibraryName,
                                    " (rebuild it with this binary)"));
      continue;
    }
    return api;
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "cannot load the SentencePiece support library (install libsentencepiece0 and put ",
      kSentencePieceLibraryName, " next to the binary or pass --sp_library): ",
      absl::StrJoin(errors, "; ")));
#endif
}

}  // namespace

SentencePieceTokenizer::SentencePieceTokenizer(std::unique_ptr<sp_shim::Processor> processor)
    : processor_(std::move(processor)), vocab_size_(processor_->PieceCount()) {}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>> SentencePieceTokenizer::Create(
    const std::string& model_path, const std::string& library_path) {
  std::ifstream in(model_path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("cannot read SentencePiece model '", model_path, "'"));
  }
  std::ostringstream bytes;
  bytes << in.rdbuf();
  absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>> tok =
      FromSerialized(bytes.str(), library_path);
  if (!tok.ok() && absl::IsInvalidArgument(tok.status())) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", model_path, "': ", tok.status().message()));
  }
  return tok;
}

absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>> SentencePieceTokenizer::FromSerialized(
    const std::string& serialized_model, const std::string& library_path) {
  if (serialized_model.empty()) {
    return absl::InvalidArgumentError("not a SentencePiece model: the file is empty");
  }
  absl::StatusOr<const sp_shim::Api*> api = LoadApi(library_path);
  if (!api.ok()) return api.status();
  std::unique_ptr<sp_shim::Processor> processor((*api)->new_processor());
  std::string error;
  if (!processor->Load(serialized_model, &error)) {
    return absl::InvalidArgumentError(absl::StrCat("not a SentencePiece model: ", error));
  }
  return std::unique_ptr<SentencePieceTokenizer>(
      new SentencePieceTokenizer(std::move(processor)));
}

absl::StatusOr<std::string> SentencePieceTokenizer::Train(const std::string& text,
                                                          const std::string& args,
                                                          const std::string& library_path) {
  absl::StatusOr<const sp_shim::Api*> api = LoadApi(library_path);
  if (!api.ok()) return api.status();
  std::string model, error;
  if (!(*api)->train(text, args, &model, &error)) {
    return absl::InvalidArgumentError(absl::StrCat("SentencePiece training failed: ", error));
  }
  return model;
}

std::vector<int32_t> SentencePieceTokenizer::Encode(absl::string_view text) const {
  std::vector<int> ids;
  std::string error;
  processor_->Encode(std::string_view(text.data(), text.size()), &ids, &error);
  return std::vector<int32_t>(ids.begin(), ids.end());
}

std::string SentencePieceTokenizer::Decode(const std::vector<int32_t>& ids) const {
  std::vector<int> valid;
  valid.reserve(ids.size());
  for (int32_t id : ids) {
    if (id >= 0 && id < vocab_size_) valid.push_back(id);
  }
  std::string text, error;
  processor_->Decode(valid, &text, &error);
  return text;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> CreateTokenizer(const TokenizerOptions& options) {
  if (options.kind == "bytes") {
    if (!options.sp_model.empty()) {
      return absl::InvalidArgumentError("--sp_model needs --tokenizer=sentencepiece");
    }
    return std::unique_ptr<Tokenizer>(std::make_unique<ByteTokenizer>());
  }
  if (options.kind == "sentencepiece") {
    if (options.sp_model.empty()) {
      return absl::InvalidArgumentError("--tokenizer=sentencepiece needs --sp_model=FILE");
    }
    absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>> tok =
        SentencePieceTokenizer::Create(options.sp_model, options.sp_library);
    if (!tok.ok()) return tok.status();
    return std::unique_ptr<Tokenizer>(std::move(*tok));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--tokenizer must be 'bytes' or 'sentencepiece', not '", options.kind, "'"));
}

}  // namespace skipswarm::model
