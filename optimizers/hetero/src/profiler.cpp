#include "erg/optimizers/hetero/profiler.hpp"

#include <algorithm>
#include <cstdio>
#include <set>

namespace erg::hetero {
namespace {

std::string fmt(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

}  // namespace

Result<std::vector<std::pair<int, Watts>>> remaining_configurations(const ProfileGrid& grid,
                                                                    const std::vector<ProfileRow>& done) {
  if (grid.gpu_type.empty()) return fail(ErrorCode::kInvalidArgument, "profile: no GPU type");
  if (grid.batch_sizes.empty() || grid.power_limits.empty())
    return fail(ErrorCode::kInvalidArgument, "profile " + grid.gpu_type + ": no batch sizes or no power limits");
  std::set<int> bs;
  for (int b : grid.batch_sizes) {
    if (b <= 0 || !bs.insert(b).second)
      return fail(ErrorCode::kInvalidArgument,
                  "profile " + grid.gpu_type + ": batch size " + std::to_string(b) + " is not positive or repeats");
  }
  std::set<double> ls;
  for (Watts l : grid.power_limits) {
    if (!(l.value() > 0) || l > grid.max_power_limit || !ls.insert(l.value()).second)
      return fail(ErrorCode::kInvalidArgument, "profile " + grid.gpu_type + ": power limit " + fmt(l.value()) +
                                                   " W is not positive, repeats or exceeds the maximum " +
                                                   fmt(grid.max_power_limit.value()) + " W");
  }
  std::set<std::pair<int, double>> have;
  for (const auto& r : done) {
    const std::string row =
        "existing row " + r.gpu_type + " " + std::to_string(r.batch_size) + " @ " + fmt(r.power_limit.value()) + " W";
    if (r.gpu_type != grid.gpu_type)
      return fail(ErrorCode::kInvalidArgument, row + ": another GPU type than " + grid.gpu_type);
    if (r.max_power_limit != grid.max_power_limit || r.idle_power != grid.idle_power)
      return fail(ErrorCode::kInvalidArgument, row + ": max_power_limit_w/idle_power_w differ from this run's (" +
                                                   fmt(grid.max_power_limit.value()) + " W, " +
                                                   fmt(grid.idle_power.value()) + " W)");
    if (!bs.contains(r.batch_size) || !ls.contains(r.power_limit.value()))
      return fail(ErrorCode::kInvalidArgument, row + ": outside the requested batch sizes × power limits");
    have.emplace(r.batch_size, r.power_limit.value());
  }
  std::vector<std::pair<int, Watts>> out;
  for (int b : bs)
    for (auto it = ls.rbegin(); it != ls.rend(); ++it)
      if (!have.contains({b, *it})) out.emplace_back(b, Watts(*it));
  return out;
}

Result<std::vector<ProfileRow>> run_profile(const ProfileGrid& grid, const std::vector<ProfileRow>& done,
                                            const RunConfiguration& run, const RowSink& sink) {
  auto todo = remaining_configurations(grid, done);
  if (!todo) return fail(todo.error());
  std::vector<ProfileRow> rows = done;
  std::set<int> out_of_memory;
  for (const auto& r : done)
    if (!r.measurement && r.power_limit == *std::max_element(grid.power_limits.begin(), grid.power_limits.end()))
      out_of_memory.insert(r.batch_size);
  for (const auto& [b, limit] : *todo) {
    ProfileRow row{grid.gpu_type, b, limit, std::nullopt, grid.max_power_limit, grid.idle_power};
    if (!out_of_memory.contains(b)) {
      auto m = run(b, limit);
      if (!m) return fail(m.error());
      row.measurement = *m;
      if (!*m) out_of_memory.insert(b);
    }
    if (sink)
      if (auto s = sink(row); !s) return fail(s.error());
    rows.push_back(row);
  }
  return rows;
}

}  // namespace erg::hetero
