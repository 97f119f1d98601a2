#include "common/bounded_file.h"

#include <filesystem>
#include <fstream>
#include <system_error>

#include "absl/strings/str_cat.h"

namespace skipswarm::common {

absl::StatusOr<std::string> ReadBoundedFile(const std::string& path, absl::string_view what,
                                            uint64_t max_bytes) {
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(st)) {
    return absl::NotFoundError(absl::StrCat("cannot open ", what, " '", path, "'"));
  }
  if (!std::filesystem::is_regular_file(st)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " '", path, "' is not a regular file"));
  }
  const uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec || size > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(what, " '", path, "' is larger than ",
                                                   max_bytes >> 20, " MiB"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", what, " '", path, "'"));
  // The size may have changed since: never read past the bound.
  std::string text(static_cast<size_t>(max_bytes) + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(what, " '", path, "' is larger than ",
                                                   max_bytes >> 20, " MiB"));
  }
  return text;
}

}  // namespace skipswarm::common
