// The record (write, read back, survive a killed writer) and the HTML's downsampling.

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "erg/exporters/report/html.hpp"
#include "erg/exporters/report/record.hpp"

namespace erg::report {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / (name + "." + std::to_string(::getpid()) + ".ergrec")).string();
}

TEST(Record, RoundTrip) {
  const auto path = temp_path("roundtrip");
  auto w = RecordWriter::create(path, /*simulated=*/true, 1'000'000'000);
  ASSERT_TRUE(w) << w.error().message;
  auto gpu = (*w)->add_device({0, "gpu", 1, "device_instant", "A100"});
  ASSERT_TRUE(gpu);
  ASSERT_TRUE((*w)->add_samples({{*gpu, 0.0, 60.5}, {*gpu, 0.1, 250.25}}));
  ASSERT_TRUE((*w)->add_window({"train", 0.0, 0.2, {{*gpu, 31.0}}}));
  ASSERT_TRUE((*w)->add_event({0.2, "power_limit.chosen", {{"power_limit_w", 250}}}));
  // Another process of the run adds to it (same t0).
  auto other = RecordWriter::open(path);
  ASSERT_TRUE(other) << other.error().message;
  EXPECT_DOUBLE_EQ((*other)->seconds_at(3'500'000'000), 2.5);
  ASSERT_TRUE((*other)->add_window({"eval", 0.1, 0.2, {}}));
  auto r = read_record(path);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->simulated());
  EXPECT_EQ(r->meta["format_version"], std::to_string(kRecordFormatVersion));
  ASSERT_EQ(r->devices.size(), 1u);
  EXPECT_EQ(device_label(r->devices[0]), "GPU 1");
  ASSERT_EQ(r->samples[*gpu].size(), 2u);
  EXPECT_DOUBLE_EQ(r->samples[*gpu][1].power_w, 250.25);
  ASSERT_EQ(r->windows.size(), 2u);
  EXPECT_DOUBLE_EQ(r->windows[0].energy_j.at(*gpu), 31.0);
  EXPECT_TRUE(r->windows[1].energy_j.empty());
  ASSERT_EQ(r->events.size(), 1u);
  EXPECT_EQ(r->events[0].data["power_limit_w"], 250);
  std::filesystem::remove(path);
}

TEST(Record, NotARecordIsRefused) {
  const auto path = temp_path("plain");
  { std::ofstream(path) << "hello"; }
  EXPECT_FALSE(read_record(path));
  EXPECT_FALSE(read_record(path + ".missing"));
  std::filesystem::remove(path);
}

TEST(Record, KilledWriterKeepsCommittedBatches) {
  const auto path = temp_path("killed");
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto w = RecordWriter::create(path, false, 0);
    if (!w) ::_exit(3);
    auto id = (*w)->add_device({0, "gpu", 0, "device_instant", ""});
    for (int batch = 0; batch < 5; ++batch) {
      std::vector<PowerSample> s;
      for (int i = 0; i < 100; ++i) s.push_back({*id, batch + i / 100.0, 100.0 + i});
      if (!(*w)->add_samples(s)) ::_exit(4);
    }
    ::kill(::getpid(), SIGKILL);  // no close, no checkpoint: as a killed erg
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));
  auto r = read_record(path);
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->devices.size(), 1u);
  EXPECT_EQ(r->samples[r->devices[0].id].size(), 500u);
  for (const char* s : {"", "-wal", "-shm"}) std::filesystem::remove(path + s);
}

TEST(Downsample, KeepsEveryMaximumAndOnlyRecordedValues) {
  // A 1-hour 100 Hz series with one spike per series at a random time.
  std::mt19937 rng(7);
  std::vector<std::vector<PowerSample>> series(3);
  std::vector<double> peaks;
  for (std::size_t k = 0; k < series.size(); ++k) {
    std::uniform_real_distribution<double> noise(100, 300);
    const std::size_t spike = std::uniform_int_distribution<std::size_t>(0, 359'999)(rng);
    for (std::size_t i = 0; i < 360'000; ++i)
      series[k].push_back({static_cast<std::int64_t>(k), i / 100.0, i == spike ? 500.0 + k : noise(rng)});
    peaks.push_back(500.0 + k);
  }
  const auto d = downsample(series, 0, 3599.99, 2000);
  ASSERT_EQ(d.t.size(), 4000u);
  for (std::size_t k = 0; k < series.size(); ++k) {
    double top = -1, bottom = 1e9;
    for (const auto& v : d.power[k]) {
      ASSERT_TRUE(v.has_value());
      top = std::max(top, *v);
      bottom = std::min(bottom, *v);
    }
    EXPECT_EQ(top, peaks[k]);
    double true_min = 1e9;
    for (const auto& s : series[k]) true_min = std::min(true_min, s.power_w);
    EXPECT_EQ(bottom, true_min);
    // Each plotted value is one of the bucket's samples.
    const std::size_t b = 1234;
    bool found = false;
    for (const auto& s : series[k])
      if (s.t_s >= b * d.bucket_s - 1e-9 && s.t_s < (b + 1) * d.bucket_s && s.power_w == *d.power[k][2 * b])
        found = true;
    EXPECT_TRUE(found);
  }
}

TEST(Downsample, EmptyBucketsHoldThePreviousSample) {
  std::vector<std::vector<PowerSample>> series{{{0, 0.0, 10}, {0, 5.0, 20}}};
  const auto d = downsample(series, 0, 10, 10);
  EXPECT_EQ(*d.power[0][2 * 3], 10);  // 3..4 s: no sample, 10 W held
  EXPECT_EQ(*d.power[0][2 * 7], 20);
}

TEST(Integrate, HoldsEachSampleUntilTheNext) {
  std::vector<PowerSample> s{{0, 0.0, 100}, {0, 1.0, 200}, {0, 3.0, 50}};
  EXPECT_DOUBLE_EQ(*integrate(s, 0.5, 2.0), 0.5 * 100 + 1.0 * 200);
  EXPECT_DOUBLE_EQ(*integrate(s, 2.0, 4.0), 1.0 * 200 + 1.0 * 50);
  EXPECT_FALSE(integrate(s, -1.0, 1.0));
}

TEST(Html, SelfContainedWithDataAndTables) {
  Record rec;
  rec.meta = {
      {"format", "erg-record"}, {"format_version", "1"}, {"simulated", "1"}, {"command", R"(["train</script>.py"])"}};
  rec.devices = {{1, "gpu", 0, "device_instant", "A100"}, {2, "cpu", 0, "package", "cpu"}};
  rec.samples[1] = {{1, 0, 100}, {1, 1, 300}, {1, 2, 200}};
  rec.samples[2] = {{2, 0, 40}, {2, 2, 40}};
  rec.windows = {{"erg.run", 0, 2, {{1, 400.0}}}};
  rec.events = {{2, "power_limit.profile", {{"power_limit_w", 300}, {"energy_j", 10}, {"time_s", 1}}},
                {2, "power_limit.profile", {{"power_limit_w", 200}, {"energy_j", 8}, {"time_s", 1.2}}},
                {2, "power_limit.chosen", {{"power_limit_w", 200}}},
                {1.5, "note", {{"text", "<b>"}}}};
  const std::string h = render_html(rec);
  EXPECT_EQ(h.find("<script src"), std::string::npos);
  EXPECT_EQ(h.find("<link"), std::string::npos);
  EXPECT_EQ(h.find("train</script>"), std::string::npos);  // escaped in the page
  EXPECT_NE(h.find("ergCharts"), std::string::npos);       // the bundle is inlined
  EXPECT_NE(h.find("Simulated hardware"), std::string::npos);
  EXPECT_NE(h.find("<tr class=\"chosen\"><td>200</td>"), std::string::npos);
  EXPECT_NE(h.find("<td>CPU 0 package</td>"), std::string::npos);
  EXPECT_NE(h.find("<td>80.0*</td>"), std::string::npos);  // CPU energy of the window from its samples
  // An event of a kind the page has no view for is listed, escaped; known kinds are not.
  EXPECT_NE(h.find("<td>1.500</td><td>note</td><td><code>{&quot;text&quot;:&quot;&lt;b&gt;&quot;}</code>"),
            std::string::npos);
  EXPECT_EQ(h.find("<td>power_limit.chosen</td>"), std::string::npos);
}

TEST(Html, HeteroAndPerseusPlansHaveTheirOwnTables) {
  Record rec;
  rec.meta = {{"format", "erg-record"}, {"format_version", "1"}, {"simulated", "1"}};
  rec.devices = {{1, "gpu", 0, "device_instant", "A10"}};
  rec.samples[1] = {{1, 0, 100}, {1, 1, 120}};
  const nlohmann::json hetero = {{"kind", "hetero-plan"},
                                 {"eta", 0.5},
                                 {"global_batch", 192},
                                 {"plans",
                                  {{"heuristic",
                                    {{"cost", 31.25},
                                     {"gpus",
                                      {{{"index", 0},
                                        {"gpu_type", "A10"},
                                        {"batch_size", 140},
                                        {"power_limit_w", 150},
                                        {"step_time_s", 0.1353},
                                        {"energy_j", 20.5}},
                                       {{"index", 1},
                                        {"gpu_type", "T4"},
                                        {"batch_size", 52},
                                        {"power_limit_w", 65},
                                        {"step_time_s", 0.1349},
                                        {"energy_j", 8.41}}}}}}}}};
  nlohmann::json rows = nlohmann::json::array();
  for (int i = 0; i < 25; ++i)  // more plans than the table lists: the ends and about ten between
    rows.push_back({{"index", i}, {"time_s", 2.0 - 0.04 * i}, {"cost_j", 1000.0 + 10 * i}, {"energy_j", 1100.0 + i}});
  const nlohmann::json perseus = {{"stages", 4}, {"micro_batches", 8}, {"plans", 25}, {"frontier", rows}};
  rec.events = {{1, "hetero.plan", hetero}, {1, "perseus.frontier", perseus}};
  const std::string h = render_html(rec);
  EXPECT_NE(h.find("Heterogeneous GPU plan"), std::string::npos);
  EXPECT_NE(h.find("<tr><td>heuristic</td><td>0</td><td>A10</td><td>140</td><td>150</td><td>0.1353</td><td>20.50</td>"
                   "<td>31.25</td></tr>"),
            std::string::npos);
  EXPECT_NE(h.find("<td>T4</td><td>52</td><td>65</td>"), std::string::npos);
  EXPECT_NE(h.find("4 stages &times; 8 micro-batches, 25 plans"), std::string::npos);
  EXPECT_NE(h.find("<tr><td>0</td><td>2.0000</td><td>1000.0</td><td>1100.0</td></tr>"), std::string::npos);  // cheapest
  EXPECT_NE(h.find("<tr><td>24</td><td>1.0400</td><td>1240.0</td><td>1124.0</td></tr>"), std::string::npos);  // fastest
  EXPECT_EQ(h.find("<tr><td>23</td>"), std::string::npos);  // not every plan
  // Known kinds have their view, so they are not listed again as "other" events.
  EXPECT_EQ(h.find("<td>hetero.plan</td>"), std::string::npos);
  EXPECT_EQ(h.find("<td>perseus.frontier</td>"), std::string::npos);
}

TEST(Html, CompareShowsEachRunAndTheChange) {
  auto run = [](double watts) {
    Record r;
    r.meta = {{"format", "erg-record"}, {"format_version", "1"}, {"simulated", "0"}};
    r.devices = {{1, "gpu", 0, "device_instant", "A100"}};
    r.samples[1] = {{1, 0, watts}, {1, 10, watts}};
    return r;
  };
  const std::string h = render_compare_html({run(200), run(150)}, {"before", "after"});
  EXPECT_NE(h.find("<th>before</th><th>after</th><th>change</th>"), std::string::npos);
  // 10 s at 200 W, then at 150 W: 2000 J against 1500 J.
  EXPECT_NE(h.find("<td>GPU 0 energy (J)</td><td>2000.0</td><td>1500.0</td><td>-25.0 %</td>"), std::string::npos);
  EXPECT_NE(h.find("id=\"power-chart-1\""), std::string::npos);
  EXPECT_EQ(h.find("Simulated hardware"), std::string::npos);
}

}  // namespace
}  // namespace erg::report
