#include "common/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

extern char** environ;

namespace skipswarm::common {
namespace {

constexpr size_t kMaxStderr = 512;

// Closes a file descriptor when it leaves scope.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
  void Close() {
    if (fd >= 0) close(fd);
    fd = -1;
  }
};

int64_t MillisLeft(std::chrono::steady_clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  return left.count() < 0 ? 0 : left.count();
}

// Reads what is there from `fd` into `out` (up to `max`, the rest dropped);
// closes it at end of file or on an error.
void Drain(Fd& fd, std::string& out, size_t max) {
  char buf[4096];
  const ssize_t n = read(fd.fd, buf, sizeof(buf));
  if (n > 0) {
    const size_t room = out.size() < max ? max - out.size() : 0;
    out.append(buf, std::min(static_cast<size_t>(n), room));
  } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
    fd.Close();
  }
}

}  // namespace

absl::StatusOr<std::string> RunSubprocess(const std::vector<std::string>& argv,
                                          absl::Duration timeout, size_t max_output) {
  if (argv.empty() || argv[0].empty()) return absl::InvalidArgumentError("no program to run");
  const std::string& name = argv[0];
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) {
    return absl::UnavailableError(absl::StrCat(name, ": pipe: ", std::strerror(errno)));
  }
  Fd out_r{out_pipe[0]}, out_w{out_pipe[1]};
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    return absl::UnavailableError(absl::StrCat(name, ": pipe: ", std::strerror(errno)));
  }
  Fd err_r{err_pipe[0]}, err_w{err_pipe[1]};

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_w.fd, 1);
  posix_spawn_file_actions_adddup2(&actions, err_w.fd, 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int spawned = posix_spawnp(&pid, name.c_str(), &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) {
    return absl::NotFoundError(absl::StrCat("cannot run ", name, ": ", std::strerror(spawned)));
  }
  out_w.Close();
  err_w.Close();

  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::microseconds(absl::ToInt64Microseconds(timeout));
  std::string out, err;
  bool timed_out = false;
  while (out_r.fd >= 0 || err_r.fd >= 0) {
    pollfd fds[2] = {{out_r.fd, POLLIN, 0}, {err_r.fd, POLLIN, 0}};
    const int64_t left = MillisLeft(deadline);
    if (left == 0) {
      timed_out = true;
      break;
    }
    const int ready = poll(fds, 2, static_cast<int>(std::min<int64_t>(left, 1000)));
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    if (fds[0].revents != 0) Drain(out_r, out, max_output);
    if (fds[1].revents != 0) Drain(err_r, err, kMaxStderr);
  }
  // Both pipes closed (or the deadline passed): wait for the exit, still
  // within the deadline (a child may close its output and linger).
  int status = 0;
  while (!timed_out) {
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) {
      return absl::UnavailableError(absl::StrCat(name, ": waitpid: ", std::strerror(errno)));
    }
    const int64_t left = MillisLeft(deadline);
    if (left == 0) {
      timed_out = true;
      break;
    }
    poll(nullptr, 0, static_cast<int>(std::min<int64_t>(left, 10)));
  }
  if (timed_out) {
    kill(pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return absl::DeadlineExceededError(
        absl::StrCat(name, " did not finish within ", absl::FormatDuration(timeout), "; killed"));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return out;
  const std::string why = WIFEXITED(status)
                              ? absl::StrCat("exited with status ", WEXITSTATUS(status))
                              : absl::StrCat("was killed by signal ", WTERMSIG(status));
  const absl::string_view said = absl::StripAsciiWhitespace(err);
  return absl::UnavailableError(
      absl::StrCat(name, " ", why, said.empty() ? "" : ": ", said));
}

}  // namespace skipswarm::common
