// `erg report RUN.ergrec -o report.html`: the HTML page of a record made by `erg run --record`
// (exporters/report, docs/report.md).

#include <iostream>

#include "app.hpp"
#include "erg/exporters/report/html.hpp"
#include "erg/exporters/report/record.hpp"
#include "summary.hpp"

namespace erg::cli {

void add_report_command(CLI::App& app, Context& /*ctx*/) {
  auto* cmd = app.add_subcommand(
      "report", "Write a self-contained HTML report of a run recorded by erg run --record (or compare two runs)");
  struct Opts {
    std::string record;
    std::vector<std::string> compare;
    std::string output;
    std::string title;
  };
  auto opts = std::make_shared<Opts>();
  auto* record = cmd->add_option("record", opts->record, "The record (erg run --record FILE)");
  cmd->add_option("--compare", opts->compare, "Compare two records side by side (e.g. before and after the optimizer)")
      ->expected(2)
      ->excludes(record);
  cmd->add_option("-o,--output", opts->output, "The HTML file to write")->required();
  cmd->add_option("--title", opts->title, "The page's title (default: the recorded command)");
  cmd->footer(
      "The page holds its scripts, styles and data (no network access needed): per-device power over time with "
      "windows shaded, energy per device and per window, and the power-limit optimizer's profile when the run "
      "had one. See docs/report.md.");
  cmd->callback([opts] {
    if (!opts->compare.empty()) {
      std::vector<report::Record> runs;
      for (const auto& path : opts->compare) {
        auto r = report::read_record(path);
        if (!r)
          throw CliError{r.error().code == ErrorCode::kInvalidArgument ? kExitUsage : kExitFailure, r.error().message};
        runs.push_back(std::move(*r));
      }
      report::RenderOptions o;
      o.title = opts->title;
      const std::string html = report::render_compare_html(runs, opts->compare, o);
      if (auto r = write_file_atomically(opts->output, html); !r) throw CliError{kExitFailure, r.error().message};
      std::cerr << "erg report: " << opts->output << " (" << html.size() / 1024 << " KiB; " << runs.size()
                << " runs compared)\n";
      return;
    }
    if (opts->record.empty()) throw CliError{kExitUsage, "erg report needs a record, or --compare A B"};
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
