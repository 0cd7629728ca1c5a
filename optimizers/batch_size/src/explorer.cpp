#include "erg/optimizers/batch_size/explorer.hpp"

#include <algorithm>
#include <limits>
#include <set>
#include <string>

namespace erg::batch_size {
namespace {
tl::unexpected<Error> bad(const std::string& what) {
  return fail(ErrorCode::kInvalidArgument, "pruning explorer: " + what);
}
}  // namespace

Result<PruningExplorer> PruningExplorer::create(std::vector<int> batch_sizes, int default_batch_size, int num_rounds) {
  return restore(std::move(batch_sizes), default_batch_size, num_rounds, 0, {});
}

Result<PruningExplorer> PruningExplorer::restore(std::vector<int> batch_sizes, int default_batch_size, int num_rounds,
                                                 int round, std::map<int, Entry> entries) {
  std::sort(batch_sizes.begin(), batch_sizes.end());
  if (batch_sizes.empty()) return bad("no batch sizes");
  if (std::adjacent_find(batch_sizes.begin(), batch_sizes.end()) != batch_sizes.end())
    return bad("a batch size is listed twice");
  if (!std::binary_search(batch_sizes.begin(), batch_sizes.end(), default_batch_size))
    return bad("default batch size " + std::to_string(default_batch_size) + " is not a candidate");
  if (num_rounds < 0 || round < 0 || round > num_rounds) return bad("bad round count");
  PruningExplorer e;
  e.batch_sizes_ = std::move(batch_sizes);
  e.default_ = default_batch_size;
  e.num_rounds_ = num_rounds;
  e.round_ = round;
  if (entries.empty()) {
    e.start_round();
  } else {
    for (const auto& [b, entry] : entries)
      if (!std::binary_search(e.batch_sizes_.begin(), e.batch_sizes_.end(), b))
        return bad("entry for " + std::to_string(b) + ", not a candidate");
    if (entries.size() != e.batch_sizes_.size()) return bad("entries do not cover the candidates");
    e.entries_ = std::move(entries);
  }
  return e;
}

void PruningExplorer::start_round() {
  entries_.clear();
  for (int b : batch_sizes_) entries_[b] = Entry{};
}

std::vector<int> PruningExplorer::walk(bool down) const {
  std::vector<int> out;
  if (down) {
    for (auto it = batch_sizes_.rbegin(); it != batch_sizes_.rend(); ++it)
      if (*it <= default_) out.push_back(*it);
  } else {
    for (int b : batch_sizes_)
      if (b > default_) out.push_back(b);
  }
  return out;
}

Result<PruningExplorer::Next> PruningExplorer::next() {
  while (!done()) {
    for (bool down : {true, false}) {
      for (int b : walk(down)) {
        Entry& e = entries_[b];
        if (e.status == Status::kUnexplored) {
          e.status = Status::kDispatched;
          return Next{Action::kExplore, b};
        }
        if (e.status == Status::kDispatched) return Next{Action::kConcurrent, 0};
        if (e.status == Status::kFailed) break;  // this direction ends here
      }
    }
    // The round is over: the converged batch sizes survive, the cheapest is the next b0 (the
    // first in walk order among equals).
    std::vector<int> good;
    double best = std::numeric_limits<double>::infinity();
    int best_b = default_;
    for (bool down : {true, false}) {
      for (int b : walk(down)) {
        const Entry& e = entries_[b];
        if (e.status != Status::kConverged) break;
        good.push_back(b);
        if (e.cost < best) {
          best = e.cost;
          best_b = b;
        }
      }
    }
    if (good.empty())
      return fail(ErrorCode::kNotFound, "no batch size converged in pruning round " + std::to_string(round_ + 1) +
                                            " (b0 " + std::to_string(default_) + ")");
    std::sort(good.begin(), good.end());
    batch_sizes_ = std::move(good);
    default_ = best_b;
    ++round_;
    start_round();
  }
  return Next{Action::kDone, 0};
}

bool PruningExplorer::dispatched(int batch_size) const {
  auto it = entries_.find(batch_size);
  return !done() && it != entries_.end() && it->second.status == Status::kDispatched;
}

Result<void> PruningExplorer::report(int batch_size, double cost, bool converged) {
  if (!dispatched(batch_size)) return bad("batch size " + std::to_string(batch_size) + " is not out for exploration");
  entries_[batch_size] = Entry{converged ? Status::kConverged : Status::kFailed, cost};
  return ok();
}

Result<void> PruningExplorer::cancel(int batch_size) {
  if (!dispatched(batch_size)) return bad("batch size " + std::to_string(batch_size) + " is not out for exploration");
  entries_[batch_size] = Entry{};
  return ok();
}

}  // namespace erg::batch_size
