#include "common/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"

namespace skipswarm::common {
namespace {

// Best effort: some filesystems refuse a folder's fsync.
void FsyncFolderOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace

absl::StatusOr<std::string> ReadFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open '", path, "'"));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat("error reading '", path, "'"));
  return ss.str();
}

absl::Status WriteFileAtomically(const std::string& path, absl::string_view bytes, int mode) {
  return WriteFileAtomically(path, std::vector<absl::string_view>{bytes}, mode);
}

absl::Status WriteFileAtomically(const std::string& path,
                                 const std::vector<absl::string_view>& pieces, int mode) {
  // A temp name of its own (mkstemp), so two writers of one path never
  // share a half-written temp file: the last rename wins whole.
  std::string tmp = path + ".tmp.XXXXXX";
  auto err = [&](const char* what) {
    return absl::UnavailableError(absl::StrCat(what, " '", tmp, "': ", std::strerror(errno)));
  };
  const int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) return err("cannot create");
  absl::Status status;
  if (::fchmod(fd, static_cast<mode_t>(mode)) != 0) status = err("cannot chmod");
  for (const absl::string_view bytes : pieces) {
    size_t done = 0;
    while (status.ok() && done < bytes.size()) {
      const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        status = err("cannot write");
        break;
      }
      done += static_cast<size_t>(n);
    }
  }
  if (status.ok() && ::fsync(fd) != 0) status = err("cannot fsync");
  ::close(fd);
  if (status.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) status = err("cannot rename");
  if (!status.ok()) {
    ::unlink(tmp.c_str());  // the target is unchanged; leave no temp behind
    return status;
  }
  FsyncFolderOf(path);
  return absl::OkStatus();
}

absl::Status RenameDurably(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot rename '", from, "' to '", to, "': ", std::strerror(errno)));
  }
  FsyncFolderOf(to);
  return absl::OkStatus();
}

}  // namespace skipswarm::common
