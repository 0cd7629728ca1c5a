#include "erg/optimizers/pipeline_frequency/client/clock_guardian.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

extern char** environ;

namespace erg::pipeline_frequency {

Result<std::unique_ptr<ClockGuardian>> ClockGuardian::spawn(const std::string& executable, unsigned gpu_index) {
  if (executable.empty()) return fail(ErrorCode::kInvalidArgument, "no guardian executable given");
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0)
    return fail(ErrorCode::kUnavailable, std::string("clock guardian: pipe: ") + std::strerror(errno));
  const std::string gpu = std::to_string(gpu_index), pid = std::to_string(::getpid());
  std::vector<std::string> args = {executable, "perseus", "guard-clocks", "--gpu", gpu, "--pid", pid};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&actions);
  posix_spawnattr_init(&attr);
  // stdin: the read end (dup2 clears close-on-exec on the copy); the write end stays here only.
  posix_spawn_file_actions_adddup2(&actions, p[0], STDIN_FILENO);
  // Its own session (a signal to the rank's process group leaves it alone), default signals.
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t child = -1;
  const int rc = ::posix_spawnp(&child, executable.c_str(), &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(p[0]);
  if (rc != 0) {
    ::close(p[1]);
    return fail(ErrorCode::kUnavailable, "clock guardian: cannot start '" + executable + "': " + std::strerror(rc));
  }
  return std::unique_ptr<ClockGuardian>(new ClockGuardian(child, p[1]));
}

ClockGuardian::~ClockGuardian() { (void)release(); }

Result<int> ClockGuardian::close_and_wait(bool done, int timeout_s) {
  if (fd_ < 0) return fail(ErrorCode::kUnavailable, "the clock guardian was already let go");
  if (done) {
    static constexpr char kDone[] = "done";
    (void)!::write(fd_, kDone, sizeof kDone - 1);
  }
  ::close(fd_);
  fd_ = -1;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (r < 0) return fail(ErrorCode::kUnavailable, std::string("clock guardian: waitpid: ") + std::strerror(errno));
    if (std::chrono::steady_clock::now() >= deadline)
      return fail(ErrorCode::kTimeout, "the clock guardian (pid " + std::to_string(pid_) + ") did not exit within " +
                                           std::to_string(timeout_s) + " s");
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

Result<void> ClockGuardian::release() {
  if (fd_ < 0) return ok();
  auto r = close_and_wait(true, 10);
  if (!r) return fail(r.error());
  return ok();
}

Result<int> ClockGuardian::abandon() { return close_and_wait(false, 30); }

}  // namespace erg::pipeline_frequency
