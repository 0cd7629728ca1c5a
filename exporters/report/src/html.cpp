#include "erg/exporters/report/html.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>

namespace erg::report {

// The bundle made by web/build.mjs from the committed assets/ (embed_assets.cmake).
extern const char kReportBundleJs[];
extern const char kReportBundleCss[];

namespace {

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string num(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

double round_to(double v, double step) { return std::round(v / step) * step; }

/// JSON for a <script> element: "</" would end it, so it is written "<\/" (the same string in JSON).
std::string script_json(const nlohmann::json& j) {
  std::string s = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    out += s[i];
    if (s[i] == '<' && i + 1 < s.size() && s[i + 1] == '/') out += '\\';
  }
  return out;
}

struct Span {
  double begin = 0, end = 0;
};

/// The time the record covers: its samples and windows.
Span record_span(const Record& r) {
  double lo = INFINITY, hi = -INFINITY;
  for (const auto& [id, s] : r.samples)
    if (!s.empty()) lo = std::min(lo, s.front().t_s), hi = std::max(hi, s.back().t_s);
  for (const auto& w : r.windows) lo = std::min(lo, w.start_s), hi = std::max(hi, w.end_s);
  if (!std::isfinite(lo)) return {0, 0};
  return {lo, hi};
}

}  // namespace

std::string device_label(const RecordDevice& d) {
  std::string kind = d.kind == "gpu" ? "GPU" : d.kind == "cpu" ? "CPU" : d.kind == "soc" ? "SoC" : d.kind;
  std::string label = kind + " " + std::to_string(d.index);
  // A GPU's instant power is the default series; others say their domain.
  if (!(d.kind == "gpu" && d.domain == "device_instant") && !d.domain.empty()) label += " " + d.domain;
  return label;
}

Downsampled downsample(const std::vector<std::vector<PowerSample>>& series, double t_begin, double t_end,
                       std::size_t buckets) {
  Downsampled out;
  buckets = std::max<std::size_t>(buckets, 1);
  const double width = std::max(t_end - t_begin, 1e-9) / static_cast<double>(buckets);
  out.bucket_s = width;
  out.t.reserve(2 * buckets);
  for (std::size_t b = 0; b < buckets; ++b) {
    out.t.push_back(t_begin + width * static_cast<double>(b));
    out.t.push_back(t_begin + width * (static_cast<double>(b) + 0.5));
  }
  for (const auto& s : series) {
    std::vector<std::optional<double>> values(2 * buckets);
    std::optional<double> held;
    std::size_t i = 0;
    while (i < s.size() && s[i].t_s < t_begin) held = s[i++].power_w;
    for (std::size_t b = 0; b < buckets; ++b) {
      // The last bucket takes everything up to t_end, so rounding cannot drop the final sample.
      const double end = b + 1 == buckets ? INFINITY : t_begin + width * static_cast<double>(b + 1);
      std::size_t lo = i, hi = i, n = 0;
      for (; i < s.size() && s[i].t_s < end; ++i, ++n) {
        if (s[i].power_w < s[lo].power_w) lo = i;
        if (s[i].power_w > s[hi].power_w) hi = i;
      }
      if (n == 0) {
        values[2 * b] = values[2 * b + 1] = held;
        continue;
      }
      values[2 * b] = s[std::min(lo, hi)].power_w;
      values[2 * b + 1] = s[std::max(lo, hi)].power_w;
      held = s[i - 1].power_w;
    }
    out.power.push_back(std::move(values));
  }
  return out;
}

std::optional<double> integrate(const std::vector<PowerSample>& s, double a, double b) {
  // The sample in force at a: the last one at or before it.
  auto it = std::upper_bound(s.begin(), s.end(), a, [](double t, const PowerSample& p) { return t < p.t_s; });
  if (it == s.begin()) return std::nullopt;
  --it;
  double joules = 0, t = a;
  for (; it != s.end() && t < b; ++it) {
    const double next = (it + 1 != s.end()) ? std::min((it + 1)->t_s, b) : b;
    if (next > t) joules += it->power_w * (next - t);
    t = std::max(t, next);
  }
  return joules;
}

namespace {

/// A device's energy over the whole record: the counters' energy of the longest measured window
/// when there is one (erg run's), else the samples.
struct DeviceTotal {
  std::string label, name, source = "samples";
  std::optional<double> joules, peak_w;
  double seconds = 0;
};

/// What the pages take from one record.
struct RunView {
  Span span;
  std::vector<std::vector<PowerSample>> series;  ///< per device, as rec.devices
  std::size_t most = 0, buckets = 1;
  Downsampled ds;
  nlohmann::json profile = nlohmann::json::array();
  std::optional<double> chosen;
  nlohmann::json carbon;
  std::vector<nlohmann::json> hetero;   ///< `erg hetero plan` events
  std::vector<nlohmann::json> perseus;  ///< `erg perseus plan` events
  std::string command;
  std::vector<DeviceTotal> totals;
  nlohmann::json data;  ///< the charts' data
};

/// A number field of `j` as text with `digits` decimals, "–" when absent or not a number.
std::string field(const nlohmann::json& j, const char* key, int digits) {
  return j.is_object() && j.contains(key) && j[key].is_number() ? num(j[key].get<double>(), digits) : "–";
}

/// `erg hetero plan`'s event (its --json object): per method, each GPU's share, limit and
/// predicted step time and energy. Predictions from the profiles, so labelled as such.
std::string hetero_section(const nlohmann::json& plan) {
  std::string h = "<h2>Heterogeneous GPU plan (Zeus&sup2;, predicted from the profiles)</h2>\n";
  h += "<p>global batch " + field(plan, "global_batch", 0) + ", &eta; " + field(plan, "eta", 2) + "</p>\n";
  h += "<table class=\"hetero-plan\">\n<tr><th>method</th><th>GPU</th><th>type</th><th>batch</th>"
       "<th>limit (W)</th><th>step (s)</th><th>energy (J/step)</th><th>cost</th></tr>\n";
  if (plan.contains("plans") && plan["plans"].is_object())
    for (const auto& [method, p] : plan["plans"].items()) {
      if (!p.is_object() || !p.contains("gpus") || !p["gpus"].is_array()) continue;
      for (const auto& g : p["gpus"])
        h += "<tr><td>" + escape(method) + "</td><td>" + field(g, "index", 0) + "</td><td>" +
             escape(g.value("gpu_type", std::string())) + "</td><td>" + field(g, "batch_size", 0) + "</td><td>" +
             field(g, "power_limit_w", 0) + "</td><td>" + field(g, "step_time_s", 4) + "</td><td>" +
             field(g, "energy_j", 2) + "</td><td>" + field(p, "cost", 2) + "</td></tr>\n";
    }
  return h + "</table>\n";
}

/// `erg perseus plan`'s event: the time–cost frontier of frequency plans (modelled), its ends and
/// about ten plans between them.
std::string perseus_section(const nlohmann::json& f) {
  std::string h = "<h2>Perseus frequency plans (modelled from the profile)</h2>\n";
  h += "<p>" + field(f, "stages", 0) + " stages &times; " + field(f, "micro_batches", 0) + " micro-batches, " +
       field(f, "plans", 0) + " plans from the cheapest to the fastest</p>\n";
  h += "<table class=\"perseus-frontier\">\n<tr><th>plan</th><th>iteration (s)</th><th>effective energy (J)</th>"
       "<th>energy (J)</th></tr>\n";
  if (f.contains("frontier") && f["frontier"].is_array() && !f["frontier"].empty()) {
    const auto& rows = f["frontier"];
    const std::size_t n = rows.size(), stride = std::max<std::size_t>(1, n / 10);
    for (std::size_t i = 0; i < n; i += stride) {
      const std::size_t k = i + stride >= n ? n - 1 : i;
      h += "<tr><td>" + field(rows[k], "index", 0) + "</td><td>" + field(rows[k], "time_s", 4) + "</td><td>" +
           field(rows[k], "cost_j", 1) + "</td><td>" + field(rows[k], "energy_j", 1) + "</td></tr>\n";
      if (k == n - 1) break;
    }
  }
  return h + "</table>\n";
}

RunView view_of(const Record& rec, const RenderOptions& options) {
  RunView v;
  v.span = record_span(rec);
  for (const auto& d : rec.devices) {
    auto it = rec.samples.find(d.id);
    v.series.push_back(it == rec.samples.end() ? std::vector<PowerSample>{} : it->second);
    v.most = std::max(v.most, v.series.back().size());
  }
  // No more buckets than samples: a short run is drawn from its samples as they are.
  v.buckets = std::clamp<std::size_t>(v.most, 1, options.max_buckets);
  v.ds = downsample(v.series, v.span.begin, v.span.end, v.buckets);

  for (const auto& e : rec.events) {
    if (e.kind == "power_limit.profile" && e.data.is_object()) v.profile.push_back(e.data);
    if (e.kind == "power_limit.chosen" && e.data.contains("power_limit_w") && e.data["power_limit_w"].is_number())
      v.chosen = e.data["power_limit_w"].get<double>();
    if (e.kind == "carbon") v.carbon = e.data;
    if (e.kind == "hetero.plan" && e.data.is_object()) v.hetero.push_back(e.data);
    if (e.kind == "perseus.frontier" && e.data.is_object()) v.perseus.push_back(e.data);
  }
  if (auto it = rec.meta.find("command"); it != rec.meta.end()) {
    auto c = nlohmann::json::parse(it->second, nullptr, false);
    if (c.is_array())
      for (const auto& a : c) v.command += (v.command.empty() ? "" : " ") + (a.is_string() ? a.get<std::string>() : "");
  }

  const RecordWindow* whole = nullptr;
  for (const auto& w : rec.windows)
    if (!w.energy_j.empty() && (whole == nullptr || w.end_s - w.start_s > whole->end_s - whole->start_s)) whole = &w;
  for (std::size_t k = 0; k < rec.devices.size(); ++k) {
    const auto& d = rec.devices[k];
    const auto& s = v.series[k];
    DeviceTotal t;
    t.label = device_label(d);
    t.name = d.name;
    if (whole != nullptr)
      if (auto it = whole->energy_j.find(d.id); it != whole->energy_j.end())
        t.joules = it->second, t.source = "counter";
    if (!t.joules && !s.empty()) t.joules = integrate(s, s.front().t_s, s.back().t_s);
    for (const auto& p : s) t.peak_w = std::max(t.peak_w.value_or(-INFINITY), p.power_w);
    t.seconds = whole ? whole->end_s - whole->start_s : (s.empty() ? 0 : s.back().t_s - s.front().t_s);
    v.totals.push_back(t);
  }

  nlohmann::json& data = v.data;
  data["simulated"] = rec.simulated();
  nlohmann::json devices = nlohmann::json::array();
  for (const auto& d : rec.devices) devices.push_back({{"label", device_label(d)}, {"kind", d.kind}});
  data["devices"] = devices;
  nlohmann::json t = nlohmann::json::array();
  for (double x : v.ds.t) t.push_back(round_to(x, 1e-4));
  nlohmann::json power = nlohmann::json::array();
  for (const auto& s : v.ds.power) {
    nlohmann::json values = nlohmann::json::array();
    for (const auto& x : s) values.push_back(x ? nlohmann::json(round_to(*x, 1e-3)) : nlohmann::json(nullptr));
    power.push_back(std::move(values));
  }
  data["timeline"] = {{"t", t}, {"series", power}, {"bucket_s", v.ds.bucket_s}};
  nlohmann::json windows = nlohmann::json::array();
  for (const auto& w : rec.windows) windows.push_back({{"name", w.name}, {"start_s", w.start_s}, {"end_s", w.end_s}});
  data["windows"] = windows;
  if (!v.profile.empty())
    data["power_limit"] = {{"profile", v.profile},
                           {"chosen_w", v.chosen ? nlohmann::json(*v.chosen) : nlohmann::json()}};
  else
    data["power_limit"] = nullptr;
  return v;
}

std::string page_head(const std::string& title) {
  std::string h = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  h += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  h += "<title>erg report: " + escape(title) + "</title>\n<style>\n";
  h += kReportBundleCss;
  h += "\n</style>\n</head>\n<body>\n";
  return h;
}

std::string page_tail(const nlohmann::json& data) {
  std::string h = "<script id=\"erg-data\" type=\"application/json\">" + script_json(data) + "</script>\n";
  h += "<script>\n";
  h += kReportBundleJs;
  h += "\n</script>\n</body>\n</html>\n";
  return h;
}

std::string downsampling_note(const RunView& v) {
  return "<p class=\"note\">Shaded spans are windows. " +
         (v.most > v.buckets ? "Each of the " + std::to_string(v.buckets) + " buckets of " + num(v.ds.bucket_s, 3) +
                                   " s shows its lowest and highest sample, so every peak is kept."
                             : std::string("Every recorded sample is shown.")) +
         "</p>\n";
}

std::string profile_table(const RunView& v, const std::string& id) {
  std::string h = "<table id=\"" + id +
                  "\">\n<tr><th>power limit (W)</th><th>energy (J)</th><th>time (s)</th>"
                  "<th>chosen</th></tr>\n";
  for (const auto& p : v.profile) {
    const double limit = p.value("power_limit_w", 0.0);
    const bool is_chosen = v.chosen && *v.chosen == limit;
    h += std::string("<tr") + (is_chosen ? " class=\"chosen\"" : "") + "><td>" + num(limit, 0) + "</td><td>" +
         num(p.value("energy_j", 0.0), 2) + "</td><td>" + num(p.value("time_s", 0.0), 3) + "</td><td>" +
         (is_chosen ? "chosen" : "") + "</td></tr>\n";
  }
  return h + "</table>\n";
}

}  // namespace

std::string render_html(const Record& rec, const RenderOptions& options) {
  const RunView v = view_of(rec, options);
  const std::string title = !options.title.empty() ? options.title : v.command.empty() ? "erg run" : v.command;
  const std::string sim = rec.simulated() ? " (simulated)" : "";

  std::string h = page_head(title);
  h.reserve(1 << 20);
  h += "<h1>erg report</h1>\n<p class=\"sub\"><code>" + escape(title) + "</code></p>\n";
  if (rec.simulated()) h += "<p class=\"simulated\">Simulated hardware: every figure on this page is simulated.</p>\n";
  h += "<table class=\"meta\">\n";
  h += "<tr><th>duration</th><td>" + num(v.span.end - v.span.begin, 2) + " s</td></tr>\n";
  for (const char* key : {"created_utc", "exit_code", "status", "format_version"})
    if (auto it = rec.meta.find(key); it != rec.meta.end())
      h += std::string("<tr><th>") + key + "</th><td>" + escape(it->second) + "</td></tr>\n";
  h += "</table>\n";

  h += "<h2>Power over time" + sim + "</h2>\n<div id=\"power-chart\" class=\"chart\"></div>\n";
  h += downsampling_note(v);

  h += "<h2>Energy per device" + sim + "</h2>\n<table id=\"device-energy\">\n";
  h += "<tr><th>device</th><th>name</th><th>energy (J)</th><th>mean power (W)</th><th>max power (W)</th>"
       "<th>source</th></tr>\n";
  for (const auto& t : v.totals)
    h += "<tr><td>" + escape(t.label) + "</td><td>" + escape(t.name) + "</td><td>" +
         (t.joules ? num(*t.joules, 1) : "–") + "</td><td>" +
         (t.joules && t.seconds > 0 ? num(*t.joules / t.seconds, 1) : "–") + "</td><td>" +
         (t.peak_w ? num(*t.peak_w, 1) : "–") + "</td><td>" + t.source + "</td></tr>\n";
  h += "</table>\n";

  if (!rec.windows.empty()) {
    h += "<h2>Energy per window" + sim +
         "</h2>\n<table id=\"window-energy\">\n<tr><th>window</th><th>start (s)</th>"
         "<th>duration (s)</th>";
    for (const auto& d : rec.devices) h += "<th>" + escape(device_label(d)) + " (J)</th>";
    h += "<th>total (J)</th></tr>\n";
    for (const auto& w : rec.windows) {
      h += "<tr><td>" + escape(w.name) + "</td><td>" + num(w.start_s - v.span.begin, 2) + "</td><td>" +
           num(w.end_s - w.start_s, 3) + "</td>";
      double total = 0;
      bool complete = true;
      for (std::size_t k = 0; k < rec.devices.size(); ++k) {
        std::optional<double> j;
        std::string mark;
        if (auto it = w.energy_j.find(rec.devices[k].id); it != w.energy_j.end()) {
          j = it->second;
        } else {
          j = integrate(v.series[k], w.start_s, w.end_s);
          mark = "*";  // from the samples, not a counter
        }
        if (j)
          total += *j;
        else
          complete = false;
        h += "<td>" + (j ? num(*j, 1) + mark : "–") + "</td>";
      }
      h += "<td>" + (complete ? num(total, 1) : "–") + "</td></tr>\n";
    }
    h += "</table>\n<p class=\"note\">* integrated from the power samples; the others are the energy "
         "counters' measurement.</p>\n";
  }

  if (!v.profile.empty()) {
    h += "<h2>Power-limit optimizer" + sim + "</h2>\n<div id=\"profile-chart\" class=\"chart\"></div>\n";
    h += profile_table(v, "power-limit-profile");
  }

  for (const auto& plan : v.hetero) h += hetero_section(plan);
  for (const auto& frontier : v.perseus) h += perseus_section(frontier);

  if (v.carbon.is_object()) {
    h += "<h2>Carbon and cost" + sim + "</h2>\n<table id=\"carbon\">\n";
    for (const auto& [k, x] : v.carbon.items())
      if (!x.is_structured()) h += "<tr><th>" + escape(k) + "</th><td>" + escape(x.dump()) + "</td></tr>\n";
    h += "</table>\n";
  }
  // Events erg has no view for (e.g. a Python program's add_event): listed as they were recorded.
  std::string others;
  for (const auto& e : rec.events) {
    if (e.kind == "power_limit.profile" || e.kind == "power_limit.chosen" || e.kind == "carbon" ||
        e.kind == "hetero.plan" || e.kind == "perseus.frontier")
      continue;
    std::string text = e.data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (text.size() > 300) text = text.substr(0, 300) + "…";
    others += "<tr><td>" + num(e.t_s - v.span.begin, 3) + "</td><td>" + escape(e.kind) + "</td><td><code>" +
              escape(text) + "</code></td></tr>\n";
  }
  if (!others.empty())
    h += "<h2>Other events</h2>\n<table id=\"events\">\n<tr><th>time (s)</th><th>kind</th><th>data</th></tr>\n" +
         others + "</table>\n";
  h += page_tail(v.data);
  return h;
}

std::string render_compare_html(const std::vector<Record>& runs, const std::vector<std::string>& names,
                                const RenderOptions& options) {
  std::vector<RunView> views;
  for (const auto& r : runs) views.push_back(view_of(r, options));
  bool simulated = false;
  for (const auto& r : runs) simulated = simulated || r.simulated();
  std::string title = options.title;
  if (title.empty())
    for (std::size_t i = 0; i < names.size(); ++i) title += (i ? " vs " : "") + names[i];
  const std::string sim = simulated ? " (simulated)" : "";

  std::string h = page_head(title);
  h += "<h1>erg report: comparison</h1>\n<p class=\"sub\"><code>" + escape(title) + "</code></p>\n";
  if (simulated) h += "<p class=\"simulated\">Simulated hardware: figures from simulated runs are simulated.</p>\n";

  // Side by side: each run's figures, and each later run's change against the first.
  auto cell = [](std::optional<double> x, int digits) { return "<td>" + (x ? num(*x, digits) : "–") + "</td>"; };
  auto delta = [](std::optional<double> a, std::optional<double> b) {
    if (!a || !b || *a == 0) return std::string("<td>–</td>");
    char buf[32];
    std::snprintf(buf, sizeof buf, "%+.1f %%", 100.0 * (*b - *a) / *a);
    return "<td>" + std::string(buf) + "</td>";
  };
  h += "<h2>Side by side" + sim + "</h2>\n<table id=\"compare\">\n<tr><th></th>";
  for (std::size_t i = 0; i < views.size(); ++i) {
    h += "<th>" + escape(i < names.size() ? names[i] : "run " + std::to_string(i + 1)) + "</th>";
    if (i > 0) h += "<th>change</th>";
  }
  h += "</tr>\n";
  auto row = [&](const std::string& label, const std::function<std::optional<double>(const RunView&)>& f, int digits) {
    h += "<tr><td>" + escape(label) + "</td>";
    for (std::size_t i = 0; i < views.size(); ++i) {
      h += cell(f(views[i]), digits);
      if (i > 0) h += delta(f(views[0]), f(views[i]));
    }
    h += "</tr>\n";
  };
  row(
      "duration (s)", [](const RunView& v) { return std::optional<double>(v.span.end - v.span.begin); }, 2);
  row(
      "energy, all devices (J)",
      [](const RunView& v) {
        double sum = 0;
        for (const auto& t : v.totals) sum += t.joules.value_or(0);
        return std::optional<double>(sum);
      },
      1);
  // Devices by label, in the first run's order, then any the others add.
  std::vector<std::string> labels;
  for (const auto& v : views)
    for (const auto& t : v.totals)
      if (std::find(labels.begin(), labels.end(), t.label) == labels.end()) labels.push_back(t.label);
  for (const auto& label : labels) {
    auto find = [label](const RunView& v) -> const DeviceTotal* {
      for (const auto& t : v.totals)
        if (t.label == label) return &t;
      return nullptr;
    };
    row(
        label + " energy (J)",
        [&](const RunView& v) {
          auto* t = find(v);
          return t ? t->joules : std::nullopt;
        },
        1);
    row(
        label + " max power (W)",
        [&](const RunView& v) {
          auto* t = find(v);
          return t ? t->peak_w : std::nullopt;
        },
        1);
  }
  row(
      "chosen power limit (W)", [](const RunView& v) { return v.chosen; }, 0);
  h += "</table>\n";

  nlohmann::json data;
  data["simulated"] = simulated;
  data["runs"] = nlohmann::json::array();
  for (std::size_t i = 0; i < views.size(); ++i) {
    const std::string name = i < names.size() ? names[i] : "run " + std::to_string(i + 1);
    h += "<h2>Power over time: " + escape(name) + (runs[i].simulated() ? " (simulated)" : "") + "</h2>\n";
    h += "<div id=\"power-chart-" + std::to_string(i) + "\" class=\"chart\"></div>\n" + downsampling_note(views[i]);
    if (!views[i].profile.empty()) h += profile_table(views[i], "power-limit-profile-" + std::to_string(i));
    nlohmann::json d = views[i].data;
    d["name"] = name;
    data["runs"].push_back(std::move(d));
  }
  h += page_tail(data);
  return h;
}

}  // namespace erg::report
