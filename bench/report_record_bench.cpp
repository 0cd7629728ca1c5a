// Acceptance 2 of `erg report` (issue 22): writes a synthetic (simulated-labelled) record of a
// 1-hour run at 100 Hz on 8 GPUs — noisy training power with a one-sample spike per GPU at a random
// time, an evaluation window every 10 minutes — then reads it back and renders the HTML, and prints
// the figures as JSON: {"samples", "record_write_s", "read_ms", "render_ms", "html_bytes"} (read and
// render: the median of 3). tests/report/large-test renders the same record with `erg report` and
// loads it in Chromium.
//
//   report_record_bench OUT.ergrec [--seconds 3600] [--hz 100] [--gpus 8]

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "erg/exporters/report/html.hpp"
#include "erg/exporters/report/record.hpp"

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: report_record_bench OUT.ergrec [--seconds S] [--hz HZ] [--gpus N]\n";
    return 2;
  }
  const std::string path = argv[1];
  double seconds = 3600, hz = 100;
  unsigned gpus = 8;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--seconds")
      seconds = std::atof(argv[i + 1]);
    else if (k == "--hz")
      hz = std::atof(argv[i + 1]);
    else if (k == "--gpus")
      gpus = static_cast<unsigned>(std::atoi(argv[i + 1]));
  }
  using erg::report::PowerSample;
  auto start = std::chrono::steady_clock::now();
  auto w = erg::report::RecordWriter::create(path, /*simulated=*/true, 0);
  if (!w) return std::cerr << w.error().message << "\n", 1;
  (void)(*w)->set_meta("command", R"(["report_record_bench","synthetic 1-hour run"])");
  std::mt19937_64 rng(22);
  std::vector<std::int64_t> ids;
  for (unsigned g = 0; g < gpus; ++g)
    ids.push_back(*(*w)->add_device({0, "gpu", g, "device_instant", "synthetic A100"}));
  const auto n = static_cast<std::size_t>(seconds * hz);
  std::vector<std::size_t> spike(gpus);
  for (auto& s : spike) s = std::uniform_int_distribution<std::size_t>(0, n - 1)(rng);
  std::normal_distribution<double> noise(0, 15);
  // One batch per simulated second of all GPUs, as erg run commits them.
  std::vector<PowerSample> batch;
  const auto per_batch = static_cast<std::size_t>(hz);
  for (std::size_t i = 0; i < n; ++i) {
    const double t = static_cast<double>(i) / hz;
    const bool eval = std::fmod(t, 600.0) >= 540.0;  // the last minute of each 10 is evaluation
    for (unsigned g = 0; g < gpus; ++g) {
      const double base = eval ? 180.0 : 330.0 + 10.0 * g;
      const double p = i == spike[g] ? 420.0 + g : std::clamp(base + noise(rng), 60.0, 400.0);
      batch.push_back({ids[g], t, p});
    }
    if ((i + 1) % per_batch == 0 || i + 1 == n) {
      if (auto r = (*w)->add_samples(batch); !r) return std::cerr << r.error().message << "\n", 1;
      batch.clear();
    }
  }
  for (double t = 540; t < seconds; t += 600) (void)(*w)->add_window({"eval", t, std::min(t + 60, seconds), {}});
  (void)(*w)->add_window({"train", 0, seconds, {}});
  w->reset();
  const double write_s = seconds_since(start);

  std::vector<double> read_ms, render_ms;
  std::size_t bytes = 0;
  for (int k = 0; k < 3; ++k) {
    auto t0 = std::chrono::steady_clock::now();
    auto rec = erg::report::read_record(path);
    if (!rec) return std::cerr << rec.error().message << "\n", 1;
    read_ms.push_back(1000 * seconds_since(t0));
    auto t1 = std::chrono::steady_clock::now();
    bytes = erg::report::render_html(*rec).size();
    render_ms.push_back(1000 * seconds_since(t1));
  }
  std::sort(read_ms.begin(), read_ms.end());
  std::sort(render_ms.begin(), render_ms.end());
  nlohmann::json j{{"samples", n * gpus},
                   {"record_write_s", write_s},
                   {"read_ms", read_ms[1]},
                   {"render_ms", render_ms[1]},
                   {"html_bytes", bytes}};
  std::cout << j.dump() << "\n";
  return 0;
}
