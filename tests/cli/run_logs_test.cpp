// What `erg run` leaves behind when it is stopped: the --output and --timeline files when erg is
// killed (SIGKILL: everything up to the last second, well-formed) or stopped (SIGTERM, SIGINT:
// complete), and the simulated machines it made (removed on SIGTERM/SIGINT; after a SIGKILL,
// removed by the next erg that makes one, unless a process still runs on them).

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "process.hpp"

namespace erg {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;
using testing::BackgroundShell;
using testing::shell_quote;

std::string erg() { return shell_quote(ERG_CLI_PATH); }
/// `exec env ...`: the background shell becomes erg, so its pid is erg's.
std::string erg_in(const std::string& sim_dir) {
  return "exec env -u ERG_SIMULATE -u ERG_SIM_STATE -u ERG_NVML_LIBRARY -u ERG_POWERCAP_ROOT -u CUDA_VISIBLE_DEVICES "
         "ERG_SIM_TMPDIR=" +
         shell_quote(sim_dir) + " " + erg();
}

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

/// The simulated machines' directories under `dir`.
std::vector<std::string> machines(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind("erg-sim-", 0) == 0) out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

/// The pid a machine directory names as its creator (0 if none).
int creator_pid(const std::string& machine_dir) {
  std::istringstream lines(slurp(machine_dir + "/creator"));
  std::string line;
  while (std::getline(lines, line))
    if (line.rfind("pid ", 0) == 0) return std::stoi(line.substr(4));
  return 0;
}

/// A --timeline file, checked line by line: the header, then rows of four fields each ending in a
/// newline, times and powers numbers. Rows by "device/domain".
std::map<std::string, std::vector<std::pair<double, double>>> read_timeline(const std::string& path) {
  std::map<std::string, std::vector<std::pair<double, double>>> rows;
  const std::string text = slurp(path);
  EXPECT_FALSE(text.empty()) << path;
  EXPECT_EQ(text.back(), '\n') << "the last row is complete";
  std::istringstream lines(text);
  std::string line;
  std::getline(lines, line);
  EXPECT_EQ(line, "time_s,device,domain,power_w");
  while (std::getline(lines, line)) {
    std::vector<std::string> f;
    std::stringstream ss(line);
    for (std::string cell; std::getline(ss, cell, ',');) f.push_back(cell);
    EXPECT_EQ(f.size(), 4u) << line;
    if (f.size() != 4) continue;
    std::size_t used_t = 0, used_w = 0;
    const double t = std::stod(f[0], &used_t), w = std::stod(f[3], &used_w);
    EXPECT_EQ(used_t, f[0].size()) << line;
    EXPECT_EQ(used_w, f[3].size()) << line;
    rows[f[1] + "/" + f[2]].emplace_back(t, w);
  }
  for (auto& [key, points] : rows)
    EXPECT_TRUE(std::is_sorted(points.begin(), points.end(), [](auto& a, auto& b) { return a.first < b.first; }))
        << key << "'s rows are in time order";
  return rows;
}

json read_json(const std::string& path) {
  try {
    return json::parse(slurp(path));
  } catch (const std::exception& e) {
    ADD_FAILURE() << path << " is not JSON: " << e.what() << "\n" << slurp(path);
    return json::object();
  }
}

TEST(ErgRunLogs, SigkillLeavesBothFilesWellFormedUpToTheLastSecond) {
  testing::TempDir dir;
  const std::string sim = dir.path() + "/sim", out = dir.path() + "/result.json", timeline = dir.path() + "/t.csv",
                    ready = dir.path() + "/ready";
  fs::create_directory(sim);
  BackgroundShell run(
      erg_in(sim) + " --simulate 2xA100 run --output " + shell_quote(out) + " --timeline " + shell_quote(timeline) +
      " -- sh -c " +
      shell_quote("touch " + shell_quote(ready) + "; exec " + erg() + " simulate load --util 0.8 --seconds 60"));
  ASSERT_TRUE(testing::wait_for_file(ready, 60s)) << run.err();
  std::this_thread::sleep_for(5s);
  run.signal(SIGKILL);
  ASSERT_EQ(run.wait(10s), 128 + SIGKILL);
  run.signal_group(SIGKILL);  // the load it ran

  // The result so far: a JSON document that says it is not the final one, with the energy of at
  // least the time up to the last whole second before the kill (erg ran at least 5 s).
  json j = read_json(out);
  EXPECT_EQ(j["status"], "running");
  EXPECT_FALSE(j["complete"].get<bool>());
  EXPECT_TRUE(j["exit_code"].is_null());
  EXPECT_EQ(j["command"][0], "sh");
  EXPECT_TRUE(j["simulated"].get<bool>());
  const double time_s = j["time_s"].get<double>();
  EXPECT_GE(time_s, 3.5) << "at most about a second lost";
  ASSERT_EQ(j["gpus"].size(), 2u);
  for (const auto& g : j["gpus"]) {
    EXPECT_GT(g["energy_j"].get<double>(), 0.0);
    EXPECT_GT(g["avg_power_w"].get<double>(), 200.0) << "the load shows (A100 at 80 %)";
    EXPECT_NEAR(g["energy_j"].get<double>(), g["avg_power_w"].get<double>() * time_s, 1.0);
  }
  ASSERT_EQ(j["cpus"].size(), 1u);
  EXPECT_GT(j["cpus"][0]["energy_j"].get<double>(), 0.0);
  EXPECT_GT(j["total_energy_j"].get<double>(), 0.0);

  // The timeline: complete rows for every device from the start to within about a second of the
  // kill.
  auto rows = read_timeline(timeline);
  for (const char* key : {"gpu0/device_instant", "gpu1/device_instant", "cpu0/package", "cpu0/dram"}) {
    ASSERT_TRUE(rows.count(key)) << key;
    const auto& p = rows[key];
    EXPECT_EQ(p.front().first, 0.0) << key;
    EXPECT_GE(p.back().first, 3.5) << key << ": at most about a second lost";
  }
  EXPECT_GT(std::max(rows["gpu0/device_instant"].back().second, rows["gpu1/device_instant"].back().second), 200.0);
}

TEST(ErgRunLogs, SigtermAndSigintLeaveCompleteFilesAndNoMachine) {
  for (int sig : {SIGTERM, SIGINT}) {
    SCOPED_TRACE(sig == SIGTERM ? "SIGTERM" : "SIGINT");
    testing::TempDir dir;
    const std::string sim = dir.path() + "/sim", out = dir.path() + "/result.json", timeline = dir.path() + "/t.csv",
                      ready = dir.path() + "/ready";
    fs::create_directory(sim);
    BackgroundShell run(
        erg_in(sim) + " --simulate 1xA100 run --output " + shell_quote(out) + " --timeline " + shell_quote(timeline) +
        " -- sh -c " +
        shell_quote("touch " + shell_quote(ready) + "; exec " + erg() + " simulate load --util 0.8 --seconds 60"));
    ASSERT_TRUE(testing::wait_for_file(ready, 60s)) << run.err();
    std::this_thread::sleep_for(2s);
    run.signal(sig);
    // erg forwards the signal; the load stops and exits 128 + sig; erg writes its files and
    // exits with the command's code.
    ASSERT_EQ(run.wait(60s), 128 + sig) << run.err();
    EXPECT_NE(run.err().find("TOTAL"), std::string::npos) << run.err();

    json j = read_json(out);
    EXPECT_EQ(j["status"], "complete");
    EXPECT_TRUE(j["complete"].get<bool>());
    EXPECT_EQ(j["exit_code"], 128 + sig);
    const double time_s = j["time_s"].get<double>();
    EXPECT_GE(time_s, 1.9);
    EXPECT_LT(time_s, 50.0) << "the command was stopped";
    EXPECT_GT(j["gpus"][0]["energy_j"].get<double>(), 0.0);

    auto rows = read_timeline(timeline);
    for (const char* key : {"gpu0/device_instant", "cpu0/package", "cpu0/dram"}) {
      ASSERT_TRUE(rows.count(key)) << key;
      const auto& p = rows[key];
      EXPECT_EQ(p.front().first, 0.0) << key;
      EXPECT_NEAR(p.back().first, time_s, 0.01) << key << " ends at the run's end";
    }
    // CPU power is derived from the package counter: its rows integrate to the package energy.
    const auto& pkg = rows["cpu0/package"];
    double integral = 0;
    for (std::size_t i = 0; i + 1 < pkg.size(); ++i) integral += pkg[i].second * (pkg[i + 1].first - pkg[i].first);
    const double energy = j["cpus"][0]["energy_j"].get<double>();
    EXPECT_NEAR(integral, energy, 0.02 * energy);

    EXPECT_TRUE(machines(sim).empty()) << "erg removed the machine it made";
  }
}

TEST(ErgRunLogs, AnOutputThatCannotBeWrittenMidRunIsAWarningThenAnError) {
  testing::TempDir dir;
  const std::string sim = dir.path() + "/sim", out_dir = dir.path() + "/out", out = out_dir + "/result.json",
                    timeline = out_dir + "/t.csv", moved = dir.path() + "/moved", ready = dir.path() + "/ready";
  fs::create_directory(sim);
  fs::create_directory(out_dir);
  BackgroundShell run(erg_in(sim) + " --simulate 1xA100 run --output " + shell_quote(out) + " --timeline " +
                      shell_quote(timeline) + " -- sh -c " +
                      shell_quote("touch " + shell_quote(ready) + "; sleep 3.5; echo child-finished"));
  ASSERT_TRUE(testing::wait_for_file(ready, 60s)) << run.err();
  ASSERT_TRUE(testing::wait_for_file(out, 10s)) << "the first document is written when the command starts";
  // The directory goes away under erg (renamed: root could write into a read-only one).
  fs::rename(out_dir, moved);
  EXPECT_EQ(run.wait(60s), 1) << "the result could not be written";
  EXPECT_NE(run.out().find("child-finished"), std::string::npos) << "the command ran to its end";
  const std::string err = run.err();
  const std::string warning = "erg: warning: cannot write " + out + ": No such file or directory";
  const auto first = err.find(warning);
  EXPECT_NE(first, std::string::npos) << err;
  EXPECT_EQ(err.find(warning, first + 1), std::string::npos) << "the same problem is reported once: " << err;
  EXPECT_NE(err.find("erg: error: cannot write " + out + ": No such file or directory"), std::string::npos) << err;
  // The timeline's rows went on into the moved file; erg says its path no longer holds them.
  const std::string moved_away = "erg: warning: cannot write " + timeline + ": it was moved or removed while erg ran";
  const auto at = err.find(moved_away);
  EXPECT_NE(at, std::string::npos) << err;
  EXPECT_EQ(err.find(moved_away, at + 1), std::string::npos) << err;
  read_timeline(moved + "/t.csv");
  json j = read_json(moved + "/result.json");
  EXPECT_EQ(j["status"], "running") << "the last document written is whole";
}

TEST(SimulatedMachines, AKilledErgsMachineIsRemovedByTheNextErgUnlessStillInUse) {
  testing::TempDir dir;
  const std::string sim = dir.path() + "/sim", a_ready = dir.path() + "/a", b_ready = dir.path() + "/b",
                    a_child = dir.path() + "/a.pid";
  fs::create_directory(sim);
  auto devices = [&] {
    auto r = testing::run_shell(erg_in(sim) + " --simulate 1xA100 devices");
    EXPECT_EQ(r.exit_code, 0) << r.err;
  };
  // A kept machine (Machine::create with keep_dir) has no creator record: never removed.
  const std::string kept = sim + "/erg-sim-kept";
  fs::create_directories(kept + "/sys");
  std::ofstream(kept + "/state") << "kept on purpose";

  BackgroundShell a(
      erg_in(sim) + " --simulate 1xA100 run -- sh -c " +
      shell_quote("echo $$ > " + shell_quote(a_child) + "; touch " + shell_quote(a_ready) + "; exec sleep 60"));
  ASSERT_TRUE(testing::wait_for_file(a_ready, 60s)) << a.err();
  BackgroundShell b(erg_in(sim) + " --simulate 1xA100 run -- sh -c " +
                    shell_quote("touch " + shell_quote(b_ready) + "; exec sleep 60"));
  ASSERT_TRUE(testing::wait_for_file(b_ready, 60s)) << b.err();
  auto all = machines(sim);
  ASSERT_EQ(all.size(), 3u);
  std::string a_dir, b_dir;
  for (const auto& m : all) {
    if (creator_pid(m) == a.pid()) a_dir = m;
    if (creator_pid(m) == b.pid()) b_dir = m;
  }
  ASSERT_FALSE(a_dir.empty());
  ASSERT_FALSE(b_dir.empty());

  a.signal(SIGKILL);
  ASSERT_EQ(a.wait(10s), 128 + SIGKILL);
  EXPECT_TRUE(fs::exists(a_dir)) << "nothing removes a SIGKILLed erg's machine at once";
  // Its command (sleep) still runs on the machine: it stays.
  devices();
  EXPECT_TRUE(fs::exists(a_dir)) << "a machine still in use by the killed erg's command is kept";

  a.signal_group(SIGKILL);  // now the command too
  ASSERT_TRUE(testing::wait_for_process_gone(std::stoi(slurp(a_child)), 10s));
  // A process whose ERG_SIM_STATE names the machine protects it (a different spec: a new one is
  // made, so stale ones are looked for).
  auto r = testing::run_shell(
      "env -u ERG_SIMULATE -u ERG_NVML_LIBRARY -u ERG_POWERCAP_ROOT ERG_SIM_TMPDIR=" + shell_quote(sim) +
      " ERG_SIM_STATE=" + shell_quote(a_dir + "/state") + " " + erg() + " --simulate 2xA100 devices");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(a_dir)) << "the machine this erg's ERG_SIM_STATE names is kept";

  devices();
  EXPECT_FALSE(fs::exists(a_dir)) << "the next erg that made a machine removed the stale one";
  EXPECT_TRUE(fs::exists(b_dir)) << "a live erg's machine is untouched";
  EXPECT_TRUE(fs::exists(kept + "/state")) << "a directory without a creator record is untouched";
  std::vector<std::string> left{kept, b_dir};
  std::sort(left.begin(), left.end());
  EXPECT_EQ(machines(sim), left) << "and the erg just run removed its own";

  b.signal(SIGTERM);
  EXPECT_EQ(b.wait(30s), 128 + SIGTERM) << b.err();
  EXPECT_EQ(machines(sim), std::vector<std::string>{kept}) << "erg removes its machine on SIGTERM";
}

}  // namespace
}  // namespace erg
