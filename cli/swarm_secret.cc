#include "cli/swarm_secret.h"

#include <sys/stat.h>

#include <fstream>
#include <iterator>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace skipswarm::cli {

absl::StatusOr<std::string> ResolveSwarmSecret(const SwarmSecretSources& sources,
                                               std::string* warning) {
  const bool from_env = sources.env.has_value() && !sources.env->empty();
  const int given = !sources.flag.empty() + !sources.file.empty() + from_env;
  if (given > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the swarm secret is given more than one way (--swarm_secret, --swarm_secret_file, $",
        kSwarmSecretEnv, "): give exactly one, preferably the file"));
  }
  std::string note;
  std::string secret;
  if (!sources.flag.empty()) {
    note = absl::StrCat(
        "--swarm_secret on the command line is visible to every user of this machine (ps, "
        "/proc) and kept in shell history: put it in a file readable only by you "
        "(--swarm_secret_file=PATH, chmod 600) or in the environment ($",
        kSwarmSecretEnv, ")");
    secret = sources.flag;
  } else if (from_env) {
    secret = *sources.env;
  } else if (!sources.file.empty()) {
    std::ifstream in(sources.file, std::ios::binary);
    if (!in) {
      return absl::InvalidArgumentError(
          absl::StrCat("--swarm_secret_file=", sources.file, " cannot be read"));
    }
    std::string text;
    text.resize(kMaxSwarmSecretFileBytes + 1);
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    text.resize(static_cast<size_t>(in.gcount()));
    if (text.size() > kMaxSwarmSecretFileBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--swarm_secret_file=", sources.file, " is longer than ", kMaxSwarmSecretFileBytes,
          " bytes: not a secret file"));
    }
    secret = std::string(absl::StripAsciiWhitespace(text));
    if (secret.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--swarm_secret_file=", sources.file, " is empty"));
    }
    struct stat st {};
    if (stat(sources.file.c_str(), &st) == 0 && (st.st_mode & 077) != 0) {
      note = absl::StrCat("--swarm_secret_file=", sources.file,
                          " can be read by other users: chmod 600 it");
    }
  }
  if (warning != nullptr) *warning = std::move(note);
  return secret;
}

}  // namespace skipswarm::cli
