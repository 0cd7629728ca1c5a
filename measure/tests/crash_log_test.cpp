// A process that is SIGKILLed while logging windows loses at most the row being written: every
// row it completed is intact in the CSV log.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "erg/measure/energy_monitor.hpp"
#include "erg/sim/fake_devices.hpp"

namespace erg::measure {
namespace {

[[noreturn]] void log_forever(const std::string& path) {
  std::vector<std::shared_ptr<Gpu>> gpus;
  std::vector<std::shared_ptr<sim::FakeGpu>> fakes;
  for (unsigned i = 0; i < 4; ++i) {
    fakes.push_back(std::make_shared<sim::FakeGpu>(i));
    gpus.push_back(fakes.back());
  }
  std::vector<std::shared_ptr<Cpu>> cpus{std::make_shared<sim::FakeCpu>(0)};
  EnergyMonitorOptions o;
  o.extrapolate_counters = false;  // fakes: exact counters, plain differences
  o.follow_counters = false;
  o.log_file = path;
  auto m = EnergyMonitor::create(gpus, cpus, o);
  if (!m) _exit(3);
  for (long i = 0;; ++i) {
    std::string name = "window-" + std::to_string(i);
    (void)(*m)->begin_window(name, false);
    for (auto& f : fakes) f->add_energy_mj(1234.5);
    (void)(*m)->end_window(name, false);
  }
}

TEST(CrashLog, SigkillLosesNoCompletedRow) {
  char dir[] = "/tmp/erg-crash-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  std::string path = std::string(dir) + "/log.csv";
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) log_forever(path);
  // Let it write a good number of rows (up to 20 s: a sanitized build on a loaded machine is
  // slow to start), then kill it mid-stream.
  for (int i = 0; i < 2000; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);  // (uintmax_t)-1 while absent
    if (!ec && size > 200'000) break;
  }
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));

  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string log = ss.str();
  ASSERT_FALSE(log.empty());
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (true) {
    auto nl = log.find('\n', start);
    if (nl == std::string::npos) break;
    lines.push_back(log.substr(start, nl - start));
    start = nl + 1;
  }
  const bool partial_tail = start < log.size();  // at most the row being written
  ASSERT_GE(lines.size(), 10u);
  EXPECT_EQ(lines[0],
            "start_time,window_name,elapsed_time,gpu0_energy,gpu1_energy,gpu2_energy,gpu3_energy,"
            "cpu0_energy,dram0_energy");
  for (std::size_t i = 1; i < lines.size(); ++i) {
    // Every completed row: the i-th window, 9 fields, each GPU 1.2345 J.
    std::vector<std::string> fields;
    std::stringstream row(lines[i]);
    std::string field;
    while (std::getline(row, field, ',')) fields.push_back(field);
    ASSERT_EQ(fields.size(), 9u) << "row " << i << ": " << lines[i];
    EXPECT_EQ(fields[1], "window-" + std::to_string(i - 1));
    for (int g = 3; g < 7; ++g) EXPECT_EQ(fields[g], "1.234500") << lines[i];
  }
  std::cout << "rows intact: " << lines.size() - 1 << (partial_tail ? " (+1 partial row being written)" : "") << "\n";
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace erg::measure
