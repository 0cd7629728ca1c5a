#pragma once
/// `erg report`: one self-contained HTML page from a record (record.hpp) — the charts' JavaScript
/// (uPlot, bundled by web/build.mjs) and CSS inlined, the data as JSON in the page, so it opens
/// offline and from a mail attachment.

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "erg/exporters/report/record.hpp"

namespace erg::report {

/// Power series put on one shared time axis of `buckets` buckets from `t_begin` to `t_end`, with
/// two points per bucket: the smallest and the largest sample of the bucket, in the order they
/// came. Every plotted value is a recorded sample, and every series' maximum (and minimum)
/// survives however long the run. A bucket without samples holds the series' previous sample
/// (sample-and-hold, as the timeline means it); before a series' first sample its values are empty.
struct Downsampled {
  double bucket_s = 0;
  std::vector<double> t;                                  ///< 2 per bucket: its start and its middle
  std::vector<std::vector<std::optional<double>>> power;  ///< per series, one per t
};
/// `series`: each in time order. `buckets` ≥ 1.
Downsampled downsample(const std::vector<std::vector<PowerSample>>& series, double t_begin, double t_end,
                       std::size_t buckets);

/// Energy (J) of a series from `a` to `b` s, integrating with hold-last (a sample's power until
/// the next sample); nullopt with no sample at or before `a`.
std::optional<double> integrate(const std::vector<PowerSample>& series, double a, double b);

struct RenderOptions {
  /// Most buckets of the power chart: 2 points each per series. 2000 keeps a 1-hour 8-GPU run near
  /// 1 MB and is about the pixel width of a wide screen, so nothing visible is lost.
  std::size_t max_buckets = 2000;
  std::string title;  ///< default: the recorded command
};

/// The HTML page of `record`.
std::string render_html(const Record& record, const RenderOptions& options = {});

/// One page comparing runs (e.g. before and after the optimizer): a side-by-side table of each
/// run's duration, energy and peak power per device with each later run's change against the
/// first, and each run's power chart. `names` label the runs (e.g. the record files).
std::string render_compare_html(const std::vector<Record>& runs, const std::vector<std::string>& names,
                                const RenderOptions& options = {});

/// The label of a device's series in the charts and tables ("GPU 0", "CPU 0 package").
std::string device_label(const RecordDevice& device);

}  // namespace erg::report
