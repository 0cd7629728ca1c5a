// `erg report RUN.ergrec -o report.html`: the HTML page of a record made by `erg run --record`
// (exporters/report, docs/report.md).

#include <iostream>

#include "app.hpp"
#include "erg/exporters/report/html.hpp"
#include "erg/exporters/report/record.hpp"
#include "summary.hpp"

namespace erg::cli {

void add_report_command(CLI::App& app, Context& /*ctx*/) {
  auto* cmd = app.add_subcommand("report", "Write a self-contained HTML report of a run recorded by erg run --record");
  struct Opts {
    std::string record;
    std::string output;
    std::string title;
  };
  auto opts = std::make_shared<Opts>();
  cmd->add_option("record", opts->record, "The record (erg run --record FILE)")->required();
  cmd->add_option("-o,--output", opts->output, "The HTML file to write")->required();
  cmd->add_option("--title", opts->title, "The page's title (default: the recorded command)");
  cmd->footer(
      "The page holds its scripts, styles and data (no network access needed): per-device power over time with "
      "windows shaded, energy per device and per window, and the power-limit optimizer's profile when the run "
      "had one. See docs/report.md.");
  cmd->callback([opts] {
    auto rec = report::read_record(opts->record);
    if (!rec)
      throw CliError{rec.error().code == ErrorCode::kInvalidArgument ? kExitUsage : kExitFailure, rec.error().message};
    report::RenderOptions o;
    o.title = opts->title;
    const std::string html = report::render_html(*rec, o);
    if (auto r = write_file_atomically(opts->output, html); !r) throw CliError{kExitFailure, r.error().message};
    std::size_t samples = 0;
    for (const auto& [id, s] : rec->samples) samples += s.size();
    std::cerr << "erg report: " << opts->output << " (" << html.size() / 1024 << " KiB; " << rec->devices.size()
              << " series, " << samples << " samples, " << rec->windows.size() << " windows"
              << (rec->simulated() ? ", simulated" : "") << ")\n";
  });
}

}  // namespace erg::cli
