#include "erg/optimizers/zeus_sim/trace.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>

#ifndef ERG_ZEUS_TRACE_SOURCE_DIR
#define ERG_ZEUS_TRACE_SOURCE_DIR ""
#endif
#ifndef ERG_ZEUS_TRACE_INSTALL_DIR
#define ERG_ZEUS_TRACE_INSTALL_DIR ""
#endif

namespace erg::zeus_sim {
namespace {

constexpr std::string_view kTrainHeader =
    "dataset,network,batch_size,optimizer,learning_rate,run,target_metric,target_epoch";
constexpr std::string_view kPowerHeader =
    "dataset,network,batch_size,optimizer,power_limit,time_per_epoch,average_power";
constexpr std::array<std::string_view, 4> kGpus = {"a40", "p100", "rtx6000", "v100"};

/// Splits `csv` into lines (dropping a CR before each LF and a final empty line) and calls
/// `row(fields, line_number)` for each line after the header, which must be `header`.
template <class F>
Result<void> each_row(std::string_view csv, std::string_view header, F&& row) {
  std::size_t line_no = 0;
  while (!csv.empty()) {
    const auto nl = csv.find('\n');
    std::string_view line = csv.substr(0, nl);
    csv = nl == std::string_view::npos ? std::string_view{} : csv.substr(nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    ++line_no;
    if (line_no == 1) {
      if (line != header)
        return fail(ErrorCode::kInvalidArgument, "line 1: expected the header '" + std::string(header) + "'");
      continue;
    }
    std::vector<std::string_view> fields;
    std::size_t start = 0;
    for (;;) {
      const auto comma = line.find(',', start);
      fields.push_back(line.substr(start, comma - start));
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
    if (auto r = row(fields, line_no); !r) return r;
  }
  if (line_no == 0) return fail(ErrorCode::kInvalidArgument, "empty file");
  return ok();
}

tl::unexpected<Error> bad_field(std::size_t line, std::string_view column, std::string_view text) {
  return fail(ErrorCode::kInvalidArgument,
              "line " + std::to_string(line) + ": bad " + std::string(column) + " '" + std::string(text) + "'");
}

std::optional<double> to_double(std::string_view s) {
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || end != s.data() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<int> to_int(std::string_view s) {
  const auto v = to_double(s);  // the traces write some integers as 100.0
  if (!v || *v != std::floor(*v) || std::abs(*v) > 1e9) return std::nullopt;
  return static_cast<int>(*v);
}

Result<std::string> read_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return fail(ErrorCode::kNotFound, path.string() + ": no such file");
  std::ifstream f(path, std::ios::binary);
  std::ostringstream text;
  text << f.rdbuf();
  if (!f) return fail(ErrorCode::kIo, path.string() + ": cannot read it");
  return text.str();
}

}  // namespace

Result<std::vector<TrainRow>> parse_train_trace(std::string_view csv) {
  std::vector<TrainRow> rows;
  auto r = each_row(csv, kTrainHeader, [&](const std::vector<std::string_view>& f, std::size_t line) -> Result<void> {
    if (f.size() != 8)
      return fail(ErrorCode::kInvalidArgument,
                  "line " + std::to_string(line) + ": expected 8 fields, got " + std::to_string(f.size()));
    TrainRow row{std::string(f[0]), std::string(f[1]), std::string(f[3]), 0, std::string(f[4]), 0, 0, std::nullopt};
    const auto bs = to_int(f[2]);
    if (!bs || *bs <= 0) return bad_field(line, "batch_size", f[2]);
    row.batch_size = *bs;
    const auto run = to_int(f[5]);
    if (!run) return bad_field(line, "run", f[5]);
    row.run = *run;
    const auto target = to_double(f[6]);
    if (!target) return bad_field(line, "target_metric", f[6]);
    row.target_metric = *target;
    if (f[7] != "nan") {
      const auto epoch = to_int(f[7]);
      if (!epoch || *epoch < 0) return bad_field(line, "target_epoch", f[7]);
      row.target_epoch = *epoch;
    }
    rows.push_back(std::move(row));
    return ok();
  });
  if (!r) return fail(r.error());
  return rows;
}

Result<std::vector<PowerRow>> parse_power_trace(std::string_view csv) {
  std::vector<PowerRow> rows;
  auto r = each_row(csv, kPowerHeader, [&](const std::vector<std::string_view>& f, std::size_t line) -> Result<void> {
    if (f.size() != 7)
      return fail(ErrorCode::kInvalidArgument,
                  "line " + std::to_string(line) + ": expected 7 fields, got " + std::to_string(f.size()));
    const auto bs = to_int(f[2]);
    if (!bs || *bs <= 0) return bad_field(line, "batch_size", f[2]);
    const auto limit = to_double(f[4]);
    if (!limit || *limit <= 0) return bad_field(line, "power_limit", f[4]);
    const auto tpe = to_double(f[5]);
    if (!tpe || *tpe <= 0) return bad_field(line, "time_per_epoch", f[5]);
    const auto avg = to_double(f[6]);
    if (!avg || *avg <= 0) return bad_field(line, "average_power", f[6]);
    rows.push_back(PowerRow{std::string(f[0]), std::string(f[1]), std::string(f[3]), *bs, Watts(*limit), Seconds(*tpe),
                            Watts(*avg)});
    return ok();
  });
  if (!r) return fail(r.error());
  return rows;
}

std::span<const std::string_view> trace_gpus() { return kGpus; }

Result<Traces> load_traces(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    return fail(ErrorCode::kNotFound, "trace directory " + dir.string() + " does not exist");
  const auto with_path = [](const std::filesystem::path& p, const Error& e) {
    return fail(e.code, e.code == ErrorCode::kInvalidArgument ? p.string() + ": " + e.message : e.message);
  };
  Traces t;
  const auto train_path = dir / "summary_train.csv";
  auto text = read_file(train_path);
  if (!text) return fail(text.error());
  auto train = parse_train_trace(*text);
  if (!train) return with_path(train_path, train.error());
  t.train = std::move(*train);
  for (std::string_view gpu : kGpus) {
    const auto path = dir / ("summary_power_" + std::string(gpu) + ".csv");
    if (!std::filesystem::exists(path, ec)) continue;
    auto power_text = read_file(path);
    if (!power_text) return fail(power_text.error());
    auto power = parse_power_trace(*power_text);
    if (!power) return with_path(path, power.error());
    t.power.emplace(std::string(gpu), std::move(*power));
  }
  if (t.power.empty())
    return fail(ErrorCode::kNotFound, "trace directory " + dir.string() + " has no summary_power_<gpu>.csv");
  return t;
}

std::vector<std::filesystem::path> default_trace_dirs() {
  std::vector<std::filesystem::path> dirs;
  for (const char* d : {ERG_ZEUS_TRACE_SOURCE_DIR, ERG_ZEUS_TRACE_INSTALL_DIR})
    if (*d != '\0') dirs.emplace_back(d);
  return dirs;
}

Result<std::filesystem::path> find_trace_dir() {
  std::string looked;
  for (const auto& d : default_trace_dirs()) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(d / "summary_train.csv", ec)) return d;
    looked += (looked.empty() ? "" : ", ") + d.string();
  }
  return fail(ErrorCode::kNotFound, "no Zeus traces found (looked in " +
                                        (looked.empty() ? std::string("nowhere") : looked) + "); pass --trace-dir DIR");
}

}  // namespace erg::zeus_sim
