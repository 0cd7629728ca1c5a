#include "erg/optimizers/pipeline_frequency/client/optimizer.hpp"

#include <algorithm>
#include <charconv>
#include <functional>

#include "erg/measure/energy_monitor.hpp"
#include "erg/optimizers/pipeline_frequency/client/clock_guardian.hpp"
#include "erg/optimizers/pipeline_frequency/server/client.hpp"

namespace erg::pipeline_frequency {

namespace {

constexpr const char* kStepWindow = "__PipelineFrequencyOptimizer_step";
constexpr const char* kInstructionWindow = "__PipelineFrequencyOptimizer_instruction";

Error with_context(Error e, const std::string& what) {
  e.message = what + ": " + e.message;
  return e;
}

std::string why(const measure::GpuEnergy& g) { return g.error ? g.error->message : "no reason given"; }

}  // namespace

Result<std::pair<std::string, int>> parse_server_url(std::string_view url) {
  const std::string_view scheme = "http://";
  if (url.substr(0, scheme.size()) != scheme)
    return fail(ErrorCode::kInvalidArgument,
                "server_url '" + std::string(url) + "' must start with http:// (https is not supported)");
  std::string_view rest = url.substr(scheme.size());
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  const auto colon = rest.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || rest.find('/') != std::string_view::npos)
    return fail(ErrorCode::kInvalidArgument, "server_url '" + std::string(url) + "' is not http://HOST:PORT");
  int port = 0;
  const auto digits = rest.substr(colon + 1);
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
  if (ec != std::errc() || end != digits.data() + digits.size() || port <= 0 || port > 65535)
    return fail(ErrorCode::kInvalidArgument, "server_url '" + std::string(url) + "' has no valid port (1-65535)");
  return std::pair{std::string(rest.substr(0, colon)), port};
}

struct PipelineFrequencyOptimizer::Impl {
  std::shared_ptr<Gpu> gpu;
  RankPlacement placement;
  PipelineFrequencyOptions options;
  std::unique_ptr<server::Client> client;
  std::unique_ptr<measure::EnergyMonitor> monitor;
  std::string job_id;
  std::vector<int> available;
  std::optional<Megahertz> memory_clock;
  std::optional<Megahertz> current;
  bool sm_locked = false;  // this optimizer locked SM clocks that are not reset yet
  bool reset = false;
  std::unique_ptr<ClockGuardian> guardian;  // resets the clocks if this process dies first

  server::FrequencySchedule schedule;
  std::size_t next = 0;        // next schedule entry
  bool have_schedule = false;  // this round's schedule was fetched and is not reported yet
  bool in_step = false;
  std::optional<std::string> open;  // the instruction being measured
  std::vector<InstructionFigures> instructions;
  std::vector<server::ProfilingResult> results;
  int steps = 0;

  void sync() const {
    if (options.sync) options.sync();
  }

  Result<void> lock_sm(Megahertz f) {
    if (reset) return fail(ErrorCode::kUnavailable, "the clocks were reset; this optimizer locks nothing more");
    if (current && current->value() == f.value()) return ok();
    auto r = gpu->set_gpu_locked_clocks(f, f);
    if (!r) return fail(with_context(r.error(), "locking the SM clock at " + std::to_string(int(f.value())) + " MHz"));
    current = f;
    sm_locked = true;
    return ok();
  }

  Result<void> fetch_schedule() {
    auto s = client->get_schedule(job_id, placement.rank);
    if (!s) return fail(with_context(s.error(), "rank " + std::to_string(placement.rank) + ": GET /schedule"));
    for (const auto& [name, mhz] : s->frequencies)
      if (name != "forward" && name != "backward")
        return fail(ErrorCode::kInvalidArgument, "the server's schedule names an unknown instruction '" + name + "'");
    schedule = std::move(*s);
    next = 0;
    have_schedule = true;
    return ok();
  }
};

PipelineFrequencyOptimizer::PipelineFrequencyOptimizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

PipelineFrequencyOptimizer::~PipelineFrequencyOptimizer() {
  if (impl_) (void)reset_clocks();
}

Result<std::unique_ptr<PipelineFrequencyOptimizer>> PipelineFrequencyOptimizer::create(
    std::shared_ptr<Gpu> gpu, RankPlacement p, PipelineFrequencyOptions options) {
  if (!gpu) return fail(ErrorCode::kInvalidArgument, "no GPU given");
  if (p.dp_degree < 1 || p.pp_degree < 1 || p.tp_degree < 1)
    return fail(ErrorCode::kInvalidArgument, "dp_degree, pp_degree and tp_degree must be at least 1");
  if (p.world_size != p.dp_degree * p.pp_degree * p.tp_degree)
    return fail(ErrorCode::kInvalidArgument,
                "world_size " + std::to_string(p.world_size) + " is not dp_degree * " +
                    "pp_degree * tp_degree = " + std::to_string(p.dp_degree * p.pp_degree * p.tp_degree));
  auto in = [](int v, int n) { return v >= 0 && v < n; };
  if (!in(p.rank, p.world_size) || !in(p.dp_rank, p.dp_degree) || !in(p.pp_rank, p.pp_degree) ||
      !in(p.tp_rank, p.tp_degree))
    return fail(ErrorCode::kInvalidArgument, "rank " + std::to_string(p.rank) + " (dp " + std::to_string(p.dp_rank) +
                                                 ", pp " + std::to_string(p.pp_rank) + ", tp " +
                                                 std::to_string(p.tp_rank) + ") is outside the job's degrees");
  if (p.world_size > 1 && !options.share_job_id)
    return fail(ErrorCode::kInvalidArgument,
                "a job of several ranks needs share_job_id to hand rank 0's job id to the others");
  auto url = parse_server_url(options.server_url);
  if (!url) return fail(url.error());

  auto impl = std::make_unique<Impl>();
  impl->gpu = gpu;
  impl->placement = p;
  impl->client = std::make_unique<server::Client>(url->first, url->second, options.read_timeout);

  // The measurements: one GPU, no CPUs; edges synchronized by the optimizer itself.
  measure::EnergyMonitorOptions mo;
  mo.clock = options.clock;
  auto monitor = measure::EnergyMonitor::create({gpu}, {}, std::move(mo));
  if (!monitor) return fail(with_context(monitor.error(), "measuring GPU " + std::to_string(gpu->index())));
  impl->monitor = std::move(*monitor);
  impl->options = std::move(options);
  // The guardian before the first clock is locked: no moment leaves them unguarded.
  if (!impl->options.guardian_executable.empty()) {
    auto g = ClockGuardian::spawn(impl->options.guardian_executable,
                                  impl->options.guardian_gpu_index.value_or(gpu->index()));
    if (!g) return fail(g.error());
    impl->guardian = std::move(*g);
  }

  // The clocks: memory at its highest (where the GPU can lock it), then the SM clocks there.
  auto mems = gpu->supported_memory_clocks();
  if (!mems || mems->empty())
    return fail(ErrorCode::kInvalidArgument, "GPU " + std::to_string(gpu->index()) + " lists no memory clocks" +
                                                 (mems ? std::string() : ": " + mems.error().message));
  const Megahertz mem_max = *std::max_element(mems->begin(), mems->end());
  auto sms = gpu->supported_graphics_clocks(mem_max);
  if (!sms || sms->empty())
    return fail(ErrorCode::kInvalidArgument,
                "GPU " + std::to_string(gpu->index()) + " lists no SM clocks at memory clock " +
                    std::to_string(int(mem_max.value())) + " MHz" + (sms ? std::string() : ": " + sms.error().message));
  for (auto c : *sms) impl->available.push_back(static_cast<int>(c.value()));
  std::sort(impl->available.rbegin(), impl->available.rend());
  impl->available.erase(std::unique(impl->available.begin(), impl->available.end()), impl->available.end());

  auto opt = std::unique_ptr<PipelineFrequencyOptimizer>(new PipelineFrequencyOptimizer(std::move(impl)));
  Impl& m = *opt->impl_;
  if (m.options.lock_memory_clock) {
    auto r = gpu->set_memory_locked_clocks(mem_max, mem_max);
    if (r)
      m.memory_clock = mem_max;
    else if (r.error().code != ErrorCode::kNotSupported)  // pre-Ampere: memory clocks cannot be locked
      return fail(
          with_context(r.error(), "locking the memory clock at " + std::to_string(int(mem_max.value())) + " MHz"));
  }
  if (auto r = m.lock_sm(Megahertz(m.available.front())); !r) return fail(r.error());

  // Registration: rank 0 names the job, every rank registers, then the first schedule.
  std::optional<std::string> mine;
  if (p.rank == 0) {
    server::JobInfo job;
    job.pp_degree = p.pp_degree, job.dp_degree = p.dp_degree, job.tp_degree = p.tp_degree;
    job.world_size = p.world_size;
    job.job_metadata = m.options.job_metadata;
    auto id = m.client->register_job(job);
    if (!id) return fail(with_context(id.error(), "POST /register_job"));
    mine = *id;
  }
  if (m.options.share_job_id) {
    auto id = m.options.share_job_id(mine);
    if (!id) return fail(with_context(id.error(), "sharing the job id"));
    m.job_id = *id;
  } else {
    m.job_id = *mine;
  }
  server::RankInfo info{p.rank, p.dp_rank, p.pp_rank, p.tp_rank, m.available};
  if (auto r = m.client->register_rank(m.job_id, info); !r)
    return fail(with_context(r.error(), "rank " + std::to_string(p.rank) + ": POST /register_rank"));
  if (auto r = m.fetch_schedule(); !r) return fail(r.error());
  return opt;
}

Result<void> PipelineFrequencyOptimizer::on_step_begin() {
  Impl& m = *impl_;
  if (m.in_step) return fail(ErrorCode::kAlreadyExists, "on_step_begin called twice without on_step_end");
  if (!m.have_schedule)
    if (auto r = m.fetch_schedule(); !r) return r;
  m.sync();
  if (auto r = m.monitor->begin_window(kStepWindow, /*sync=*/false, /*restart=*/true); !r) return r;
  m.instructions.clear();
  m.in_step = true;
  return ok();
}

Result<void> PipelineFrequencyOptimizer::on_instruction_begin(std::string_view name) {
  Impl& m = *impl_;
  if (!m.in_step) return fail(ErrorCode::kInvalidArgument, "on_instruction_begin outside a step (on_step_begin first)");
  if (m.open)
    return fail(ErrorCode::kInvalidArgument,
                "on_instruction_begin(\"" + std::string(name) + "\") while \"" + *m.open + "\" is still open");
  if (m.next >= m.schedule.frequencies.size())
    return fail(ErrorCode::kInvalidArgument, "on_instruction_begin(\"" + std::string(name) + "\"): the schedule's " +
                                                 std::to_string(m.schedule.frequencies.size()) +
                                                 " instructions are used up this step");
  const auto& [planned, mhz] = m.schedule.frequencies[m.next];
  if (planned != name)
    return fail(ErrorCode::kInvalidArgument, "instruction " + std::to_string(m.next) + " of the schedule is \"" +
                                                 planned + "\", not \"" + std::string(name) + "\"");
  m.sync();     // the previous instruction's work runs at its own clock
  if (mhz > 0)  // 0: leave the clock where it is (Zeus's controller does the same)
    if (auto r = m.lock_sm(Megahertz(mhz)); !r) return r;
  if (auto r = m.monitor->begin_window(kInstructionWindow, /*sync=*/false, /*restart=*/true); !r) return r;
  m.open = planned;
  ++m.next;
  return ok();
}

Result<void> PipelineFrequencyOptimizer::on_instruction_end(std::string_view name) {
  Impl& m = *impl_;
  if (!m.open || *m.open != name)
    return fail(ErrorCode::kInvalidArgument, "on_instruction_end(\"" + std::string(name) + "\") without its begin" +
                                                 (m.open ? " (\"" + *m.open + "\" is open)" : std::string()));
  m.sync();
  auto w = m.monitor->end_window(kInstructionWindow, /*sync=*/false);
  m.open.reset();
  if (!w) return fail(w.error());
  const auto& g = w->gpus.at(0);
  if (!g.energy) return fail(ErrorCode::kIo, "the energy of \"" + std::string(name) + "\" is unknown: " + why(g));
  m.instructions.push_back(InstructionFigures{std::string(name), m.current.value_or(Megahertz(0.0)), w->time, *g.energy,
                                              g.short_window, g.extrapolated});
  return ok();
}

Result<void> PipelineFrequencyOptimizer::on_step_end() {
  Impl& m = *impl_;
  if (!m.in_step) return fail(ErrorCode::kInvalidArgument, "on_step_end without on_step_begin");
  if (m.open) return fail(ErrorCode::kInvalidArgument, "on_step_end while \"" + *m.open + "\" is still open");
  if (m.next != m.schedule.frequencies.size())
    return fail(ErrorCode::kInvalidArgument, "on_step_end after " + std::to_string(m.next) + " of the schedule's " +
                                                 std::to_string(m.schedule.frequencies.size()) + " instructions");
  m.sync();
  // The step's energy is what the scheduler plans from: its end edge is settled on the counter's
  // schedule (a wait of about one counter period at most), never extrapolated past the last
  // update (a load change there was once a ±12 % error on 0.6 s steps).
  m.in_step = false;
  if (auto r = m.monitor->end_window_later(kStepWindow, /*sync=*/false); !r) return fail(r.error());
  auto w = m.monitor->collect_window(kStepWindow);
  if (!w) return fail(w.error());
  const auto& g = w->gpus.at(0);
  if (!g.energy) return fail(ErrorCode::kIo, std::string("the step's energy is unknown: ") + why(g));
  server::ProfilingResult result;
  result.rank = m.placement.rank;
  result.iter_time = {w->time.count()};
  result.iter_energy = {g.energy->value()};
  for (const char* kind : {"forward", "backward"}) {
    std::vector<double> times, energies;
    for (const auto& i : m.instructions)
      if (i.name == kind) times.push_back(i.time.count()), energies.push_back(i.energy.value());
    result.time_breakdown[kind] = {std::move(times)};
    result.energy_breakdown[kind] = {std::move(energies)};
  }
  result.coarse_energy_windows = static_cast<int>(
      std::count_if(m.instructions.begin(), m.instructions.end(), [](const auto& i) { return i.short_window; }));
  result.extrapolated_energy_windows = static_cast<int>(std::count_if(
      m.instructions.begin(), m.instructions.end(), [](const auto& i) { return i.extrapolated.count() > 0.0; }));
  ++m.steps;
  m.have_schedule = false;  // the next step asks for the next round's
  m.next = 0;
  if (auto r = m.client->post_result(m.job_id, result); !r)
    return fail(with_context(r.error(), "rank " + std::to_string(m.placement.rank) + ": POST /result"));
  m.results.push_back(std::move(result));
  return ok();
}

Result<void> PipelineFrequencyOptimizer::reset_clocks() {
  Impl& m = *impl_;
  if (m.reset) return ok();
  m.reset = true;
  Result<void> a = ok(), b = ok();
  if (m.sm_locked) a = m.gpu->reset_gpu_locked_clocks();
  if (m.memory_clock) b = m.gpu->reset_memory_locked_clocks();
  m.current.reset();
  m.sm_locked = false;
  // Reset here: the guardian has nothing left to do. If resetting failed, the guardian tries from
  // its own process now (and this waits for it).
  if (m.guardian) (void)(a && b ? m.guardian->release() : m.guardian->abandon().map([](int) {}));
  m.guardian.reset();
  return a ? b : a;
}

const std::string& PipelineFrequencyOptimizer::job_id() const { return impl_->job_id; }
const server::FrequencySchedule& PipelineFrequencyOptimizer::schedule() const { return impl_->schedule; }
const std::vector<int>& PipelineFrequencyOptimizer::available_frequencies() const { return impl_->available; }
std::optional<Megahertz> PipelineFrequencyOptimizer::current_frequency() const { return impl_->current; }
std::optional<Megahertz> PipelineFrequencyOptimizer::memory_clock() const { return impl_->memory_clock; }
const std::vector<InstructionFigures>& PipelineFrequencyOptimizer::instructions() const { return impl_->instructions; }
const std::vector<server::ProfilingResult>& PipelineFrequencyOptimizer::results() const { return impl_->results; }
int PipelineFrequencyOptimizer::steps() const { return impl_->steps; }

}  // namespace erg::pipeline_frequency
