#include "trace_profiles.hpp"

#include <map>
#include <stdexcept>

namespace erg::hetero::testing {
namespace {

// Training-set sizes (samples per epoch) from the datasets' own documentation: CIFAR-100 50,000
// images; ImageNet-1k 1,281,167 images; LibriSpeech 960 h 281,241 utterances; MovieLens-1M
// 1,000,209 ratings; Sentiment140 1,600,000 tweets; SQuAD v1.1 87,599 questions.
double dataset_size(const std::string& dataset) {
  static const std::map<std::string, double> sizes = {{"cifar100", 50'000},        {"imagenet", 1'281'167},
                                                      {"librispeech", 281'241},    {"movielens-1m", 1'000'209},
                                                      {"sentiment140", 1'600'000}, {"squad", 87'599}};
  auto it = sizes.find(dataset);
  if (it == sizes.end()) throw std::runtime_error("no dataset size for " + dataset);
  return it->second;
}

// sim/src/sku.cpp's idle_w of the traced GPUs.
double idle_power(const std::string& gpu) {
  static const std::map<std::string, double> idle = {{"v100", 25}, {"a40", 30}, {"rtx6000", 20}, {"p100", 28}};
  return idle.at(gpu);
}

bool same(const zeus_sim::PowerRow& r, const TraceWorkload& w) {
  return r.dataset == w.dataset && r.network == w.network && r.optimizer == w.optimizer;
}

std::set<double> limits(const zeus_sim::Traces& t, const std::string& gpu, const TraceWorkload& w) {
  std::set<double> out;
  for (const auto& r : t.power.at(gpu))
    if (same(r, w)) out.insert(r.power_limit.value());
  return out;
}

std::set<int> complete_batch_sizes(const zeus_sim::Traces& t, const std::string& gpu, const TraceWorkload& w) {
  const auto ls = limits(t, gpu, w);
  std::map<int, std::set<double>> seen;
  for (const auto& r : t.power.at(gpu))
    if (same(r, w)) seen[r.batch_size].insert(r.power_limit.value());
  std::set<int> out;
  for (const auto& [b, l] : seen)
    if (l == ls) out.insert(b);
  return out;
}

}  // namespace

std::vector<TraceWorkload> common_workloads(const zeus_sim::Traces& t, const std::string& a, const std::string& b) {
  std::map<std::pair<std::string, std::string>, std::set<std::string>> on_a, on_b;
  for (const auto& r : t.power.at(a)) on_a[{r.dataset, r.network}].insert(r.optimizer);
  for (const auto& r : t.power.at(b)) on_b[{r.dataset, r.network}].insert(r.optimizer);
  std::vector<TraceWorkload> out;
  for (const auto& [key, opts] : on_a) {
    auto it = on_b.find(key);
    if (it == on_b.end()) continue;
    for (const auto& o : opts)
      if (it->second.contains(o)) {
        out.push_back({key.first, key.second, o, dataset_size(key.first)});
        break;
      }
  }
  return out;
}

std::set<int> common_batch_sizes(const zeus_sim::Traces& t, const std::string& a, const std::string& b,
                                 const TraceWorkload& w) {
  const auto x = complete_batch_sizes(t, a, w), y = complete_batch_sizes(t, b, w);
  std::set<int> out;
  for (int v : x)
    if (y.contains(v)) out.insert(v);
  return out;
}

Profile trace_profile(const zeus_sim::Traces& t, const std::string& gpu, const TraceWorkload& w,
                      const std::set<int>& batch_sizes) {
  const auto ls = limits(t, gpu, w);
  std::vector<ProfileRow> rows;
  for (const auto& r : t.power.at(gpu)) {
    if (!same(r, w) || !batch_sizes.contains(r.batch_size)) continue;
    ProfileRow row;
    row.gpu_type = gpu;
    row.batch_size = r.batch_size;
    row.power_limit = r.power_limit;
    row.measurement = Measurement{Seconds(r.time_per_epoch.count() * r.batch_size / w.dataset_size), r.average_power};
    row.max_power_limit = Watts(*ls.rbegin());
    row.idle_power = Watts(idle_power(gpu));
    rows.push_back(row);
  }
  auto p = build_profiles(rows, gpu + " " + w.dataset);
  if (!p || p->size() != 1)
    throw std::runtime_error("trace profile of " + gpu + " " + w.dataset + ": " + (p ? "no rows" : p.error().message));
  return p->front();
}

}  // namespace erg::hetero::testing
