#include "erg/optimizers/pipeline_frequency/planner.hpp"

#include <cmath>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>

#include "erg/optimizers/pipeline_frequency/phillips_dessouky.hpp"

namespace erg::pipeline_frequency {

namespace {

using nlohmann::json;

std::size_t model_index(int stage, Instruction instruction) {
  return static_cast<std::size_t>(stage) * 2 + (instruction == Instruction::kForward ? 0 : 1);
}

Plan make_plan(const Frontier& f, std::vector<int> durations, long long makespan) {
  Plan p;
  p.time_units = makespan;
  p.time_s = static_cast<double>(makespan) * f.options.unit_s;
  const auto& acts = f.dag.activities();
  for (std::size_t i = 0; i < acts.size(); ++i)
    p.cost_j += f.models[model_index(acts[i].stage, acts[i].instruction)].model(durations[i]);
  p.energy_j = p.cost_j + f.options.stages * p.time_s * f.options.p2p_power_w;
  p.frequencies.resize(static_cast<std::size_t>(f.options.stages));
  for (int s = 0; s < f.options.stages; ++s)
    for (int id : f.dag.stage_order(s)) {
      const auto& a = acts[static_cast<std::size_t>(id)];
      const auto& opts = f.models[model_index(a.stage, a.instruction)].options;
      p.frequencies[static_cast<std::size_t>(s)].emplace_back(
          a.instruction, opts.option_for(durations[static_cast<std::size_t>(id)]).frequency_mhz);
    }
  p.durations_units = std::move(durations);
  return p;
}

}  // namespace

Result<Frontier> plan_pipeline(const Profile& profile, const PlannerOptions& options) {
  if (!(options.unit_s > 0) || !std::isfinite(options.unit_s))
    return fail(ErrorCode::kInvalidArgument, "the time unit must be positive");
  if (!(options.p2p_power_w >= 0) || !std::isfinite(options.p2p_power_w))
    return fail(ErrorCode::kInvalidArgument, "the P2P-blocking power must be 0 W or more");
  auto dag = PipelineDag::synchronous_1f1b(options.stages, options.micro_batches);
  if (!dag) return fail(dag.error());
  if (profile.num_stages() != options.stages)
    return fail(ErrorCode::kInvalidArgument, "the profile has " + std::to_string(profile.num_stages()) +
                                                 (profile.num_stages() == 1 ? " stage" : " stages") + " (0 to " +
                                                 std::to_string(profile.num_stages() - 1) + "), the pipeline " +
                                                 std::to_string(options.stages));
  Frontier f{options, std::move(*dag), {}, {}, 0, 0, 0};
  for (int s = 0; s < options.stages; ++s)
    for (auto instruction : {Instruction::kForward, Instruction::kBackward}) {
      std::vector<ProfileRow> rows;
      for (const auto& r : profile.rows)
        if (r.stage == s && r.instruction == instruction) rows.push_back(r);
      const std::string which = "stage " + std::to_string(s) + " " + std::string(to_string(instruction));
      if (rows.empty()) return fail(ErrorCode::kInvalidArgument, "the profile has no rows for " + which);
      auto cand = candidate_options(rows, options.p2p_power_w, options.unit_s);
      if (!cand) return fail(cand.error().code, which + ": " + cand.error().message);
      if (cand->max_units() > 10'000'000)
        return fail(ErrorCode::kInvalidArgument,
                    which + ": " + std::to_string(cand->max_units()) + " time units is too many; use a larger unit");
      std::vector<CostPoint> points;
      for (const auto& o : cand->options) points.push_back({static_cast<double>(o.units), o.cost_j});
      auto model = CostModel::fit(points);
      if (!model) return fail(model.error().code, which + ": " + model.error().message);
      f.models.push_back({std::move(*cand), *model});
    }

  std::vector<TradeoffActivity> acts;
  for (const auto& a : f.dag.activities()) {
    const auto& m = f.models[model_index(a.stage, a.instruction)];
    TradeoffActivity t{m.options.min_units(), m.options.max_units(), {}};
    for (int d = t.min_units; d <= t.max_units; ++d) t.cost_j.push_back(m.model(d));
    acts.push_back(std::move(t));
  }
  auto pd = PhillipsDessouky::create(std::move(acts), f.dag.edges());
  if (!pd) return fail(pd.error());
  std::vector<Plan> plans{make_plan(f, pd->durations(), pd->makespan())};
  for (;;) {
    auto step = pd->step();
    if (!step) return fail(step.error());
    if (!*step) break;
    ++f.iterations;
    if ((*step)->without_slow_down) ++f.without_slow_down;
    plans.push_back(make_plan(f, pd->durations(), pd->makespan()));
  }
  // Keep the frontier: walking from the fastest plan, a slower one stays only if it is no costlier
  // than every faster one (a step that had to undo a slow-down can leave an earlier plan dominated).
  double cheapest = std::numeric_limits<double>::infinity();
  std::vector<Plan> kept;
  for (auto it = plans.rbegin(); it != plans.rend(); ++it) {
    if (it->cost_j > cheapest) {
      ++f.dropped_dominated;
      continue;
    }
    cheapest = it->cost_j;
    kept.push_back(std::move(*it));
  }
  f.plans.assign(std::make_move_iterator(kept.rbegin()), std::make_move_iterator(kept.rend()));
  return f;
}

namespace {

json frequencies_json(const Plan& p) {
  json stages = json::array();
  for (const auto& stage : p.frequencies) {
    json list = json::array();
    for (const auto& [instruction, mhz] : stage) list.push_back(json::array({to_string(instruction), mhz}));
    stages.push_back(std::move(list));
  }
  return stages;
}

json plan_json(const Plan& p, std::size_t index) {
  return {{"index", index},     {"time_units", p.time_units}, {"time_s", p.time_s},
          {"cost_j", p.cost_j}, {"energy_j", p.energy_j},     {"frequencies", frequencies_json(p)}};
}

}  // namespace

std::string plan_to_json(const Plan& plan, std::size_t index, int indent) {
  return plan_json(plan, index).dump(indent);
}

std::string frontier_to_json(const Frontier& f, int indent) {
  json j;
  j["stages"] = f.options.stages;
  j["micro_batches"] = f.options.micro_batches;
  j["unit_s"] = f.options.unit_s;
  j["p2p_power_w"] = f.options.p2p_power_w;
  j["schedule"] = "synchronous_1f1b";
  j["iterations"] = f.iterations;
  j["steps_without_slow_down"] = f.without_slow_down;
  j["dropped_dominated"] = f.dropped_dominated;
  json models = json::array();
  for (const auto& m : f.models) {
    json opts = json::array();
    for (const auto& o : m.options.options)
      opts.push_back({{"frequency_mhz", o.frequency_mhz},
                      {"time_s", o.time_s},
                      {"energy_j", o.energy_j},
                      {"cost_j", o.cost_j},
                      {"units", o.units}});
    models.push_back({{"stage", m.options.stage},
                      {"instruction", to_string(m.options.instruction)},
                      {"options", opts},
                      {"model",
                       {{"kind", to_string(m.model.kind)},
                        {"a", m.model.a},
                        {"b", m.model.b},
                        {"c", m.model.c},
                        {"t0_units", m.model.t0}}}});
  }
  j["models"] = models;
  json plans = json::array();
  for (std::size_t i = 0; i < f.plans.size(); ++i) {
    auto p = plan_json(f.plans[i], i);
    p["durations_units"] = f.plans[i].durations_units;
    plans.push_back(std::move(p));
  }
  j["plans"] = plans;
  return j.dump(indent);
}

std::string to_zeus_plan_file(const Plan& plan, std::size_t index) {
  std::string out = "[\n";
  for (const auto& stage : plan.frequencies) {
    out += "  [";
    for (std::size_t k = 0; k < stage.size(); ++k)
      out += (k ? ", " : "") + std::string("(\"") + std::string(to_string(stage[k].first)) + "\", " +
             std::to_string(stage[k].second) + ")";
    out += "],\n";
  }
  out += "]\n";
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "# erg perseus plan %zu: iteration time %.6f s (%lld units), modelled effective energy %.6f J, "
                "with P2P blocking %.6f J\n",
                index, plan.time_s, plan.time_units, plan.cost_j, plan.energy_j);
  out += buf;
  return out;
}

namespace {

/// A reader of the Python-literal subset a plan file uses.
class LiteralReader {
 public:
  explicit LiteralReader(std::string_view text) : text_(text) {}

  Result<StageFrequencies> read(int micro_batches) {
    skip();
    if (!eat('[')) return error("expected '[' to open the list of stages");
    StageFrequencies out;
    std::vector<std::vector<int>> bare;  // stages written as bare MHz lists
    for (;;) {
      skip();
      if (eat(']')) break;
      if (!out.empty() || !bare.empty()) {
        if (!eat(',')) return error("expected ',' or ']' after a stage");
        skip();
        if (eat(']')) break;
      }
      if (!eat('[')) return error("expected '[' to open a stage");
      std::vector<std::pair<Instruction, int>> stage;
      std::vector<int> mhz_only;
      bool first = true;
      for (;;) {
        skip();
        if (eat(']')) break;
        if (!first) {
          if (!eat(',')) return error("expected ',' or ']' in a stage");
          skip();
          if (eat(']')) break;
        }
        first = false;
        if (peek() == '(' || peek() == '[') {
          const char close = peek() == '(' ? ')' : ']';
          ++pos_;
          skip();
          auto name = string();
          if (!name) return fail(name.error());
          const auto instruction = parse_instruction(*name);
          if (!instruction) return error("unknown instruction '" + *name + "' (forward or backward)");
          skip();
          if (!eat(',')) return error("expected ',' between the instruction and its frequency");
          skip();
          auto mhz = integer();
          if (!mhz) return fail(mhz.error());
          skip();
          eat(',');
          skip();
          if (!eat(close)) return error(std::string("expected '") + close + "' to close an entry");
          if (!mhz_only.empty()) return error("a stage mixes (instruction, MHz) entries and bare MHz");
          stage.emplace_back(*instruction, *mhz);
        } else {
          auto mhz = integer();
          if (!mhz) return fail(mhz.error());
          if (!stage.empty()) return error("a stage mixes (instruction, MHz) entries and bare MHz");
          mhz_only.push_back(*mhz);
        }
      }
      if (!mhz_only.empty()) {
        if (!out.empty()) return error("stages mix (instruction, MHz) entries and bare MHz lists");
        bare.push_back(std::move(mhz_only));
      } else {
        if (!bare.empty()) return error("stages mix (instruction, MHz) entries and bare MHz lists");
        out.push_back(std::move(stage));
      }
    }
    skip();
    if (pos_ != text_.size()) return error("unexpected text after the list of stages");
    if (bare.empty()) return out;
    // lowtime writes bare frequencies in each stage's 1F1B order; name them from that order.
    if (micro_batches < 1)
      return fail(ErrorCode::kInvalidArgument,
                  "plan file: stages list bare frequencies; the number of micro-batches is needed to name them");
    auto dag = PipelineDag::synchronous_1f1b(static_cast<int>(bare.size()), micro_batches);
    if (!dag) return fail(dag.error());
    for (int s = 0; s < dag->stages(); ++s) {
      const auto order = dag->stage_order(s);
      const auto& mhz = bare[static_cast<std::size_t>(s)];
      if (mhz.size() != order.size())
        return fail(ErrorCode::kInvalidArgument, "plan file: stage " + std::to_string(s) + " lists " +
                                                     std::to_string(mhz.size()) + " frequencies, 1F1B with " +
                                                     std::to_string(micro_batches) + " micro-batches runs " +
                                                     std::to_string(order.size()));
      std::vector<std::pair<Instruction, int>> stage;
      for (std::size_t k = 0; k < order.size(); ++k)
        stage.emplace_back(dag->activities()[static_cast<std::size_t>(order[k])].instruction, mhz[k]);
      out.push_back(std::move(stage));
    }
    return out;
  }

 private:
  [[nodiscard]] char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  bool eat(char c) {
    if (peek() != c) return false;
    ++pos_;
    return true;
  }
  void skip() {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == '#') {
        while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
      } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else {
        break;
      }
    }
  }
  tl::unexpected<Error> error(const std::string& what) const {
    int line = 1, column = 1;
    for (std::size_t i = 0; i < pos_ && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    return fail(ErrorCode::kInvalidArgument,
                "plan file line " + std::to_string(line) + ", column " + std::to_string(column) + ": " + what);
  }
  Result<std::string> string() {
    const char quote = peek();
    if (quote != '"' && quote != '\'') return error("expected a quoted instruction name");
    ++pos_;
    std::string s;
    while (pos_ < text_.size() && text_[pos_] != quote) {
      if (text_[pos_] == '\\' || text_[pos_] == '\n') return error("unsupported character in a name");
      s += text_[pos_++];
    }
    if (!eat(quote)) return error("unterminated string");
    return s;
  }
  Result<int> integer() {
    const std::size_t start = pos_;
    long long v = 0;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      v = v * 10 + (text_[pos_++] - '0');
      if (v > 100'000'000) return error("frequency out of range");
    }
    if (pos_ == start) return error("expected a frequency in MHz (an integer)");
    return static_cast<int>(v);
  }

  std::string_view text_;
  std::size_t pos_ = 0;
};

}  // namespace

Result<StageFrequencies> parse_zeus_plan_file(std::string_view text, int micro_batches) {
  return LiteralReader(text).read(micro_batches);
}

}  // namespace erg::pipeline_frequency
