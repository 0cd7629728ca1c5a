#include "perseus_sim_pipeline.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <string>
#include <utility>

#include "erg/sim/sku.hpp"
#include "erg/sim/spec.hpp"

namespace erg::pipeline_frequency::simulated {

using namespace std::chrono_literals;

namespace {

std::string where(int stage) { return "simulated pipeline, stage " + std::to_string(stage) + ": "; }

}  // namespace

Result<std::unique_ptr<SimulatedPipeline>> SimulatedPipeline::create(PipelineConfig config) {
  const int stages = static_cast<int>(config.stages.size());
  auto dag = PipelineDag::synchronous_1f1b(stages, config.micro_batches);
  if (!dag) return fail(dag.error());
  for (const auto& s : config.stages)
    if (!(s.forward > 0) || !(s.backward > 0))
      return fail(ErrorCode::kInvalidArgument, "simulated pipeline: every stage needs positive work");
  auto spec = sim::parse_spec(config.spec);
  if (!spec) return fail(spec.error());
  if (static_cast<int>(spec->gpus.size()) < stages)
    return fail(ErrorCode::kInvalidArgument, "simulated pipeline: '" + config.spec + "' has fewer GPUs than stages");
  std::unique_ptr<SimulatedPipeline> p(new SimulatedPipeline(std::move(config), std::move(*dag)));
  auto m = sim::Machine::create_temp(*spec, /*virtual_clock=*/true);
  if (!m) return fail(m.error());
  p->machine_ = std::move(*m);
  p->machine_->set_privilege(sim::Privilege::kEveryone);  // locking clocks needs it, as on a real node
  if (auto r = p->machine_->export_env(); !r) return fail(r.error());
  // Open the GPUs as every erg program does: devices/ attaches to the machine just exported (same
  // spec, ERG_SIM_STATE) and opens it through the NVML backend and the simulated driver.
  devices::DeviceOptions o;
  o.simulate = p->machine_->spec().text;
  o.daemon = devices::DaemonUse::kNever;
  o.cuda_visible_devices = std::optional<std::optional<std::string>>(std::optional<std::string>());
  auto found = devices::open_devices(o);
  if (!found) return fail(found.error());
  if (found->machine == nullptr || found->source != devices::Source::kSimulatedAttached)
    return fail(ErrorCode::kInternal, "simulated pipeline: devices/ did not attach to the pipeline's machine");
  p->devices_ = std::move(*found);
  const auto& gpus = p->devices_.inventory.gpus;
  if (static_cast<int>(gpus.size()) < stages)
    return fail(ErrorCode::kNotFound, "simulated pipeline: NVML lists fewer GPUs than stages");
  p->gpus_.assign(gpus.begin(), gpus.begin() + stages);

  const sim::Sku* sku = sim::lookup_sku(spec->gpus.front().sku);
  for (int s = 1; s < stages; ++s)
    if (sim::lookup_sku(spec->gpus[s].sku) != sku)
      return fail(ErrorCode::kInvalidArgument, "simulated pipeline: the stages' GPUs must be of one SKU");
  p->max_mhz_ = static_cast<int>(sku->max_sm_mhz);
  p->memory_bound_ = sku->memory_bound;
  auto mem = p->gpus_.front()->supported_memory_clocks();
  if (!mem || mem->empty()) return fail(ErrorCode::kNotSupported, "simulated pipeline: no memory clocks");
  auto clocks = p->gpus_.front()->supported_graphics_clocks(mem->front());
  if (!clocks) return fail(clocks.error());
  for (const auto c : *clocks) p->frequencies_.push_back(static_cast<int>(std::lround(c.value())));
  std::sort(p->frequencies_.begin(), p->frequencies_.end(), std::greater<>());
  p->locked_.assign(stages, 0);
  for (int s = 0; s < stages; ++s)
    if (auto r = p->machine_->set_utilization(s, p->config_.blocking_utilization); !r) return fail(r.error());
  return p;
}

SimulatedPipeline::~SimulatedPipeline() {
  for (auto& g : gpus_) (void)g->reset_gpu_locked_clocks();  // as a real run restores them at exit
}

StageFrequencies SimulatedPipeline::uniform(int mhz) const {
  StageFrequencies plan(stages());
  for (int s = 0; s < stages(); ++s)
    for (const int id : dag_.stage_order(s)) plan[s].emplace_back(dag_.activities()[id].instruction, mhz);
  return plan;
}

double SimulatedPipeline::work(int stage, Instruction instruction) const {
  const auto& w = config_.stages[stage];
  return instruction == Instruction::kForward ? w.forward : w.backward;
}

double SimulatedPipeline::model_time_s(int stage, Instruction instruction, int mhz) const {
  // sim's speed(f) at the highest memory clock (sku.hpp), written out so the test states the model.
  return work(stage, instruction) * ((1.0 - memory_bound_) * max_mhz_ / mhz + memory_bound_);
}

double SimulatedPipeline::seconds() const { return std::chrono::duration<double>(machine_->now()).count(); }

Result<void> SimulatedPipeline::lock(int stage, int mhz) {
  if (locked_[stage] == mhz) return {};
  if (auto r = gpus_[stage]->set_gpu_locked_clocks(Megahertz(mhz), Megahertz(mhz)); !r)
    return fail(r.error().code, where(stage) + "locking " + std::to_string(mhz) + " MHz: " + r.error().message);
  locked_[stage] = mhz;
  return {};
}

Result<IterationMeasurement> SimulatedPipeline::run(const StageFrequencies& plan, int iterations, int warmup) {
  const int S = stages();
  const auto& acts = dag_.activities();
  if (iterations < 1 || warmup < 0)
    return fail(ErrorCode::kInvalidArgument,
                "simulated pipeline: at least one measured iteration, no negative warm-up");
  if (static_cast<int>(plan.size()) != S)
    return fail(ErrorCode::kInvalidArgument, "simulated pipeline: the plan has " + std::to_string(plan.size()) +
                                                 " stages, the pipeline " + std::to_string(S));
  std::vector<int> mhz(acts.size());  // per activity id
  for (int s = 0; s < S; ++s) {
    const auto order = dag_.stage_order(s);
    if (plan[s].size() != order.size())
      return fail(ErrorCode::kInvalidArgument, where(s) + "the plan lists " + std::to_string(plan[s].size()) +
                                                   " computations, the schedule " + std::to_string(order.size()));
    for (std::size_t k = 0; k < order.size(); ++k) {
      if (plan[s][k].first != acts[order[k]].instruction)
        return fail(ErrorCode::kInvalidArgument,
                    where(s) + "computation " + std::to_string(k) + " is not the 1F1B schedule's instruction");
      if (std::find(frequencies_.begin(), frequencies_.end(), plan[s][k].second) == frequencies_.end())
        return fail(ErrorCode::kInvalidArgument,
                    where(s) + std::to_string(plan[s][k].second) + " MHz is not a supported clock");
      mhz[order[k]] = plan[s][k].second;
    }
  }
  std::vector<std::vector<int>> preds(acts.size());
  for (const auto& [from, to] : dag_.edges()) preds[to].push_back(from);
  const sim::Sku& sku = *sim::lookup_sku(machine_->spec().gpus.front().sku);

  IterationMeasurement out;
  out.stage_energy_j.assign(S, 0.0);
  out.stage_blocked_s.assign(S, 0.0);
  double t_start = 0;
  std::vector<double> e_start(S);
  for (int it = 0; it < warmup + iterations; ++it) {
    if (it == warmup) {
      t_start = seconds();
      for (int s = 0; s < S; ++s) {
        auto e = machine_->true_energy(s);
        if (!e) return fail(e.error());
        e_start[s] = e->value();
      }
    }
    const bool record = it >= warmup;
    const double t_iter = seconds();
    std::vector<double> e_iter(S), e_began(S);
    for (int s = 0; s < S; ++s) {
      auto e = machine_->true_energy(s);
      if (!e) return fail(e.error());
      e_iter[s] = e->value();
    }
    std::vector<double> act_time(acts.size()), act_energy(acts.size()), began(S);
    std::vector<char> done(acts.size(), 0);
    std::vector<std::size_t> next(S, 0);  // position in the stage's order
    std::vector<int> running(S, -1);      // activity id, −1: blocked
    std::vector<double> target(S, 0), since(S, seconds());
    int finished = 0;
    while (finished < static_cast<int>(acts.size())) {
      // Start every computation whose dependencies are done, on a GPU that is free.
      for (int s = 0; s < S; ++s) {
        if (running[s] >= 0) continue;
        auto st = machine_->status(s);
        if (!st) return fail(st.error());
        const bool more = next[s] < dag_.stage_order(s).size();
        const int id = more ? dag_.stage_order(s)[next[s]] : -1;
        if (!more || !std::all_of(preds[id].begin(), preds[id].end(), [&](int p) { return done[p] != 0; })) {
          // Blocked until its inputs arrive. Decided here, after every finish of this instant
          // is known, so a GPU that goes straight on never drops its load for zero time.
          if (st->utilization != config_.blocking_utilization)
            if (auto r = machine_->set_utilization(s, config_.blocking_utilization); !r) return fail(r.error());
          continue;
        }
        if (auto r = lock(s, mhz[id]); !r) return fail(r.error());
        if (st->utilization != 1.0)
          if (auto r = machine_->set_utilization(s, 1.0); !r) return fail(r.error());
        if (record) out.stage_blocked_s[s] += seconds() - since[s];
        began[s] = seconds();
        auto e0 = machine_->true_energy(s);
        if (!e0) return fail(e0.error());
        e_began[s] = e0->value();
        running[s] = id;
        target[s] = st->work_done + work(s, acts[id].instruction);
      }
      // Advance to the earliest finish the device model predicts (the clock is locked, the load
      // steady, so the rate is constant); a short prediction only costs another round.
      if (std::all_of(running.begin(), running.end(), [](int id) { return id < 0; }))
        return fail(ErrorCode::kInternal, "simulated pipeline: nothing can run (the DAG has a cycle?)");
      double step = 1.0;
      for (int s = 0; s < S; ++s)
        if (running[s] >= 0) {
          auto st = machine_->status(s);
          if (!st) return fail(st.error());
          step = std::min(step, (target[s] - st->work_done) / sim::model_speed(sku, mhz[running[s]]));
        }
      const auto ns = std::max<long long>(1, static_cast<long long>(std::ceil(step * 1e9)));
      if (auto r = machine_->advance(std::chrono::nanoseconds(ns)); !r) return fail(r.error());
      for (int s = 0; s < S; ++s) {
        if (running[s] < 0) continue;
        auto st = machine_->status(s);
        if (!st) return fail(st.error());
        // Done within a nanosecond's work (the simulator rounds finish times up to whole ns).
        if (target[s] - st->work_done > 1e-9 * sim::model_speed(sku, mhz[running[s]])) continue;
        auto e1 = machine_->true_energy(s);
        if (!e1) return fail(e1.error());
        act_time[running[s]] = seconds() - began[s];
        act_energy[running[s]] = e1->value() - e_began[s];
        done[running[s]] = 1;
        ++finished;
        running[s] = -1;
        ++next[s];
        since[s] = seconds();
      }
    }
    if (record) {
      for (int s = 0; s < S; ++s) out.stage_blocked_s[s] += seconds() - since[s];
      out.iteration_time_s.push_back(seconds() - t_iter);
      auto& energy = out.iteration_stage_energy_j.emplace_back(S);
      for (int s = 0; s < S; ++s) {
        auto e = machine_->true_energy(s);
        if (!e) return fail(e.error());
        energy[s] = e->value() - e_iter[s];
      }
      out.activity_time_s.push_back(std::move(act_time));
      out.activity_energy_j.push_back(std::move(act_energy));
    }
  }
  for (int s = 0; s < S; ++s)
    if (auto r = machine_->set_utilization(s, config_.blocking_utilization); !r) return fail(r.error());
  out.time_s = (seconds() - t_start) / iterations;
  for (int s = 0; s < S; ++s) {
    auto e = machine_->true_energy(s);
    if (!e) return fail(e.error());
    out.stage_energy_j[s] = (e->value() - e_start[s]) / iterations;
    out.stage_blocked_s[s] /= iterations;
    out.energy_j += out.stage_energy_j[s];
  }
  return out;
}

Result<std::pair<double, double>> SimulatedPipeline::next_counter_update(int stage) {
  auto first = gpus_[stage]->total_energy();
  if (!first) return fail(first.error());
  for (int ms = 0; ms < 10'000; ++ms) {
    if (auto r = machine_->advance(1ms); !r) return fail(r.error());
    auto e = gpus_[stage]->total_energy();
    if (!e) return fail(e.error());
    if (*e != *first) return std::make_pair(Joules(*e).value(), seconds());
  }
  return fail(ErrorCode::kUnavailable, where(stage) + "the energy counter did not change in 10 s");
}

Result<InstructionMeasurement> SimulatedPipeline::measure_instruction(int stage, Instruction instruction, int mhz,
                                                                      double window_s) {
  if (stage < 0 || stage >= stages()) return fail(ErrorCode::kInvalidArgument, where(stage) + "no such stage");
  if (auto r = lock(stage, mhz); !r) return fail(r.error());
  if (auto r = machine_->set_utilization(stage, 1.0); !r) return fail(r.error());
  // Settle: the load-change transient (τ 25 ms) and the electrical lag (τ 2 ms) die out.
  if (auto r = machine_->advance(200ms); !r) return fail(r.error());
  auto a = next_counter_update(stage);
  if (!a) return fail(a.error());
  auto w0 = machine_->status(stage);
  if (!w0) return fail(w0.error());
  if (auto r = machine_->advance(std::chrono::nanoseconds(static_cast<long long>(window_s * 1e9))); !r)
    return fail(r.error());
  auto b = next_counter_update(stage);
  if (!b) return fail(b.error());
  auto w1 = machine_->status(stage);
  if (!w1) return fail(w1.error());
  if (auto r = machine_->set_utilization(stage, config_.blocking_utilization); !r) return fail(r.error());
  // Executions completed in the window (fractional: the stream is steady), from the work done.
  const double executions = (w1->work_done - w0->work_done) / work(stage, instruction);
  if (!(executions > 0)) return fail(ErrorCode::kInternal, where(stage) + "no work done while profiling");
  return InstructionMeasurement{(b->second - a->second) / executions, (b->first - a->first) / executions};
}

Result<double> SimulatedPipeline::measure_blocking_power(int stage, double window_s) {
  if (stage < 0 || stage >= stages()) return fail(ErrorCode::kInvalidArgument, where(stage) + "no such stage");
  if (auto r = machine_->set_utilization(stage, config_.blocking_utilization); !r) return fail(r.error());
  if (auto r = machine_->advance(200ms); !r) return fail(r.error());
  auto a = next_counter_update(stage);
  if (!a) return fail(a.error());
  if (auto r = machine_->advance(std::chrono::nanoseconds(static_cast<long long>(window_s * 1e9))); !r)
    return fail(r.error());
  auto b = next_counter_update(stage);
  if (!b) return fail(b.error());
  return (b->first - a->first) / (b->second - a->second);
}

}  // namespace erg::pipeline_frequency::simulated
