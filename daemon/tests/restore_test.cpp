// Power limits come back when the process that set them through ergd exits (limit_restorer.hpp):
// child processes set limits over the real Unix socket and are killed or exit; the fake GPU
// must show its default limit again. Every wait is bounded (kBound); nothing asserts a duration.

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "socket_helpers.hpp"

namespace erg::daemon::testing {
namespace {

using namespace std::chrono_literals;

constexpr auto kBound = 10s;  // far beyond the pidfd path's milliseconds and the 0.5 s fallback
constexpr double kDefaultMw = 300000.0;

struct Events {
  std::mutex mutex;
  std::vector<std::string> lines;
  std::vector<std::string> get() {
    std::lock_guard lock(mutex);
    return lines;
  }
};

std::unique_ptr<FakeDaemon> serve_logged(const std::string& path, Events& events, bool restore = true) {
  Config c;
  c.restore_limits_on_exit = restore;
  c.event_log = [&events](const std::string& line) {
    std::lock_guard lock(events.mutex);
    events.lines.push_back(line);
  };
  return serve(path, c);
}

/// A child process that connects to `path`, sets GPU `gpu`'s limit to `mw`, reports the HTTP
/// status on a pipe, then waits to be killed (`stay`) or exits at once. Only async-signal-safe
/// calls after fork (the test process has threads).
struct Setter {
  pid_t pid = -1;
  int status = 0;

  Setter(const std::string& path, unsigned gpu, unsigned mw, bool stay)
      : Setter(path,
               "/gpu/set_power_limit?gpu_ids=" + std::to_string(gpu) + "&power_limit_mw=" + std::to_string(mw) +
                   "&block=true",
               stay) {}
  /// Any POST `target` (path and query).
  Setter(const std::string& path, const std::string& target, bool stay) {
    const std::string req = "POST " + target + " HTTP/1.1\r\nHost: ergd\r\n\r\n";
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) return;
    pid = ::fork();
    if (pid == 0) {
      ::close(p[0]);
      int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
      if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) ::_exit(3);
      if (::write(fd, req.data(), req.size()) != static_cast<ssize_t>(req.size())) ::_exit(4);
      char buf[512];
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n < 12) ::_exit(5);
      (void)!::write(p[1], buf + 9, 3);  // "200"
      ::close(fd);                       // the process, not the connection, holds the limit
      if (stay)
        for (;;) ::pause();
      ::_exit(0);
    }
    ::close(p[1]);
    char code[4] = {};
    if (::read(p[0], code, 3) == 3) status = std::atoi(code);
    ::close(p[0]);
  }
  void kill() const { ::kill(pid, SIGKILL); }
  int reap() const {
    int st = 0;
    ::waitpid(pid, &st, 0);
    return st;
  }
};

/// Waits (bounded) until GPU 0 of `f` shows `mw`.
bool limit_becomes(FakeDaemon& f, double mw, unsigned gpu = 0) {
  const auto deadline = std::chrono::steady_clock::now() + kBound;
  while (std::chrono::steady_clock::now() < deadline) {
    if (f.gpus[gpu]->power_limit()->value() == mw) return true;
    std::this_thread::sleep_for(5ms);
  }
  return false;
}

/// Waits (bounded) until `events` holds at least `n` lines and returns them. The restorer logs
/// after it has set the limit, so a test that saw the limit come back may still be ahead of
/// the log line.
std::vector<std::string> events_reach(Events& events, std::size_t n) {
  const auto deadline = std::chrono::steady_clock::now() + kBound;
  while (events.get().size() < n && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(5ms);
  return events.get();
}

TEST(RestoreOnExit, AKilledSettersLimitComesBack) {
  Events events;
  const auto path = temp_socket("restore-kill");
  auto f = serve_logged(path, events);
  Setter s(path, 0, 150000, /*stay=*/true);
  ASSERT_EQ(s.status, 200);
  EXPECT_EQ(f->gpus[0]->power_limit()->value(), 150000.0);
  // Another connection of another process does not end the claim; the child still lives.
  EXPECT_EQ(status_of(raw_exchange(path, "GET /gpu/get_power_limit?gpu_ids=0 HTTP/1.1\r\nHost: x\r\n\r\n")), 200);
  s.kill();
  EXPECT_TRUE(limit_becomes(*f, kDefaultMw)) << "GPU 0 still at " << f->gpus[0]->power_limit()->value() << " mW";
  s.reap();
  auto lines = events_reach(events, 1);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("process " + std::to_string(s.pid)), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("restored the default limit 300 W"), std::string::npos) << lines[0];
  EXPECT_EQ(f->gpus[1]->power_limit()->value(), kDefaultMw);  // untouched GPUs stay untouched
}

TEST(RestoreOnExit, ASetterThatExitsNormallyToo) {
  Events events;
  const auto path = temp_socket("restore-exit");
  auto f = serve_logged(path, events);
  Setter s(path, 2, 120000, /*stay=*/false);
  ASSERT_EQ(s.status, 200);
  EXPECT_EQ(WEXITSTATUS(s.reap()), 0);
  EXPECT_TRUE(limit_becomes(*f, kDefaultMw, 2));
}

TEST(RestoreOnExit, TheLastLiveSetterKeepsTheLimit) {
  Events events;
  const auto path = temp_socket("restore-two");
  auto f = serve_logged(path, events);
  Setter first(path, 0, 150000, true);
  ASSERT_EQ(first.status, 200);
  Setter second(path, 0, 200000, true);
  ASSERT_EQ(second.status, 200);
  first.kill();
  first.reap();
  // The second setter owns the limit: the first one's exit changes nothing. Give the watcher
  // ample time to have seen the exit (its pidfd wakes it at once).
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(f->gpus[0]->power_limit()->value(), 200000.0);
  EXPECT_TRUE(events.get().empty());
  second.kill();
  EXPECT_TRUE(limit_becomes(*f, kDefaultMw));
  second.reap();
  EXPECT_EQ(events_reach(events, 1).size(), 1u);
}

TEST(RestoreOnExit, ALimitChangedOutsideErgdIsLeftAlone) {
  Events events;
  const auto path = temp_socket("restore-outside");
  auto f = serve_logged(path, events);
  Setter s(path, 0, 150000, true);
  ASSERT_EQ(s.status, 200);
  ASSERT_TRUE(f->gpus[0]->set_power_limit(MilliWatts(250000.0)));  // e.g. nvidia-smi -pl
  s.kill();
  s.reap();
  ASSERT_EQ(events_reach(events, 1).size(), 1u);
  EXPECT_NE(events.get()[0].find("left as it is"), std::string::npos) << events.get()[0];
  EXPECT_EQ(f->gpus[0]->power_limit()->value(), 250000.0);
}

TEST(RestoreOnExit, OptOutKeepsTheLimit) {
  Events events;
  const auto path = temp_socket("restore-off");
  auto f = serve_logged(path, events, /*restore=*/false);
  Setter s(path, 0, 150000, true);
  ASSERT_EQ(s.status, 200);
  s.kill();
  s.reap();
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(f->gpus[0]->power_limit()->value(), 150000.0);
  EXPECT_TRUE(events.get().empty());
}

TEST(RestoreOnExit, TheFlagTurnsItOff) {
  const char* on[] = {"ergd"};
  const char* off[] = {"ergd", "--no-restore-on-exit"};
  auto a = parse_command_line(1, const_cast<char**>(on));
  auto b = parse_command_line(2, const_cast<char**>(off));
  ASSERT_TRUE(a && b);
  EXPECT_TRUE(a->restore_limits_on_exit);
  EXPECT_FALSE(b->restore_limits_on_exit);
}

TEST(RestoreOnExit, ASetterErgdCannotNameOwnsNothing) {
  // dispatch() without a socket or pid (as over TCP): nobody to watch, the limit stays.
  Events events;
  Config c;
  c.event_log = [&events](const std::string& line) {
    std::lock_guard lock(events.mutex);
    events.lines.push_back(line);
  };
  FakeDaemon f(c);
  ASSERT_EQ(f.call("POST", "/gpu/set_power_limit?gpu_ids=0&power_limit_mw=150000&block=true").response.status, 200);
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(f.gpus[0]->power_limit()->value(), 150000.0);
  EXPECT_TRUE(events.get().empty());
}

// Locked clocks set through ergd come back the same way, each domain on its own.

/// "/gpu/set_{gpu,mem}_locked_clocks?..." for GPU `gpu` locked to [lo, hi] MHz.
std::string lock_target(bool sm, unsigned gpu, unsigned lo, unsigned hi) {
  return std::string(sm ? "/gpu/set_gpu_locked_clocks" : "/gpu/set_mem_locked_clocks") +
         "?gpu_ids=" + std::to_string(gpu) + "&min_clock_mhz=" + std::to_string(lo) +
         "&max_clock_mhz=" + std::to_string(hi) + "&block=true";
}

using Range = std::pair<double, double>;

/// Waits (bounded) until `read()` gives `want`.
template <class F>
bool becomes(F read, Range want) {
  const auto deadline = std::chrono::steady_clock::now() + kBound;
  while (std::chrono::steady_clock::now() < deadline) {
    if (read() == want) return true;
    std::this_thread::sleep_for(5ms);
  }
  return false;
}

TEST(RestoreOnExit, AKilledSettersLockedClocksAreReset) {
  Events events;
  const auto path = temp_socket("restore-clocks-kill");
  auto f = serve_logged(path, events);
  auto& gpu = *f->gpus[1];
  Setter sm(path, lock_target(true, 1, 1005, 1005), /*stay=*/true);
  ASSERT_EQ(sm.status, 200);
  Setter mem(path, lock_target(false, 1, 1215, 1215), /*stay=*/true);
  ASSERT_EQ(mem.status, 200);
  EXPECT_EQ(gpu.locked_gpu_clocks(), Range(1005, 1005));
  EXPECT_EQ(gpu.locked_memory_clocks(), Range(1215, 1215));
  sm.kill();
  EXPECT_TRUE(becomes([&] { return gpu.locked_gpu_clocks(); }, Range(0, 0)));
  sm.reap();
  auto lines = events_reach(events, 1);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("GPU 1: process " + std::to_string(sm.pid) +
                          ", which locked its SM clocks to [1005, 1005] MHz through ergd, has exited; "
                          "reset its locked SM clocks"),
            std::string::npos)
      << lines[0];
  // The memory clocks have their own owner, still alive.
  EXPECT_EQ(gpu.locked_memory_clocks(), Range(1215, 1215));
  mem.kill();
  EXPECT_TRUE(becomes([&] { return gpu.locked_memory_clocks(); }, Range(0, 0)));
  mem.reap();
  lines = events_reach(events, 2);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[1].find("which locked its memory clocks to [1215, 1215] MHz"), std::string::npos) << lines[1];
  EXPECT_NE(lines[1].find("reset its locked memory clocks"), std::string::npos) << lines[1];
  EXPECT_EQ(f->gpus[0]->locked_gpu_clocks(), Range(0, 0));  // untouched GPUs stay untouched
}

TEST(RestoreOnExit, LockedClocksOfASetterThatExitsNormallyToo) {
  Events events;
  const auto path = temp_socket("restore-clocks-exit");
  auto f = serve_logged(path, events);
  Setter s(path, lock_target(true, 2, 210, 1410), /*stay=*/false);
  ASSERT_EQ(s.status, 200);
  EXPECT_EQ(WEXITSTATUS(s.reap()), 0);
  EXPECT_TRUE(becomes([&] { return f->gpus[2]->locked_gpu_clocks(); }, Range(0, 0)));
  EXPECT_EQ(events_reach(events, 1).size(), 1u);
}

TEST(RestoreOnExit, TheLastLiveClockSetterKeepsTheClocks) {
  Events events;
  const auto path = temp_socket("restore-clocks-two");
  auto f = serve_logged(path, events);
  auto& gpu = *f->gpus[0];
  Setter first(path, lock_target(true, 0, 1410, 1410), true);
  ASSERT_EQ(first.status, 200);
  Setter second(path, lock_target(true, 0, 1005, 1005), true);
  ASSERT_EQ(second.status, 200);
  first.kill();
  first.reap();
  // The second setter owns the clocks: the first one's exit changes nothing. Give the watcher
  // ample time to have seen the exit (its pidfd wakes it at once).
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(gpu.locked_gpu_clocks(), Range(1005, 1005));
  EXPECT_TRUE(events.get().empty());
  second.kill();
  EXPECT_TRUE(becomes([&] { return gpu.locked_gpu_clocks(); }, Range(0, 0)));
  second.reap();
  EXPECT_EQ(events_reach(events, 1).size(), 1u);
}

TEST(RestoreOnExit, AResetThroughErgdEndsTheClaim) {
  Events events;
  const auto path = temp_socket("restore-clocks-reset");
  auto f = serve_logged(path, events);
  auto& gpu = *f->gpus[0];
  Setter s(path, lock_target(true, 0, 1005, 1005), true);
  ASSERT_EQ(s.status, 200);
  ASSERT_EQ(
      status_of(raw_exchange(path, "POST /gpu/reset_locked_clocks?gpu_ids=0&block=true HTTP/1.1\r\nHost: x\r\n\r\n")),
      200);
  EXPECT_EQ(gpu.locked_gpu_clocks(), Range(0, 0));
  ASSERT_TRUE(gpu.set_gpu_locked_clocks(Megahertz(900.0), Megahertz(900.0)));  // e.g. nvidia-smi -lgc later
  s.kill();
  s.reap();
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(gpu.locked_gpu_clocks(), Range(900, 900));
  EXPECT_TRUE(events.get().empty());
}

TEST(RestoreOnExit, OptOutKeepsTheLockedClocks) {
  Events events;
  const auto path = temp_socket("restore-clocks-off");
  auto f = serve_logged(path, events, /*restore=*/false);
  Setter s(path, lock_target(false, 3, 1215, 1215), true);
  ASSERT_EQ(s.status, 200);
  s.kill();
  s.reap();
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(f->gpus[3]->locked_memory_clocks(), Range(1215, 1215));
  EXPECT_TRUE(events.get().empty());
}

}  // namespace
}  // namespace erg::daemon::testing
