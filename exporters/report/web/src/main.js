// The charts of erg report's HTML. The page carries its data as JSON in
// <script id="erg-data" type="application/json">; the tables are plain HTML written by erg, so
// only the plots need this script. Bundled with uPlot by build.mjs into one IIFE that erg inlines.
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import "./style.css";

// Distinct on white and for common colour-vision deficiencies (Okabe–Ito, then a few more).
const COLORS = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000",
  "#8C564B", "#7F7F7F", "#BCBD22", "#17BECF"];

function fmt(v, digits, unit) {
  return v == null || Number.isNaN(v) ? "–" : v.toFixed(digits) + " " + unit;
}

// Windows as shaded spans behind the lines, each labelled at its top left.
function windowsPlugin(windows) {
  return {
    hooks: {
      drawClear: [(u) => {
        const ctx = u.ctx;
        ctx.save();
        windows.forEach((w, i) => {
          const x0 = u.valToPos(w.start_s, "x", true), x1 = u.valToPos(w.end_s, "x", true);
          const left = Math.max(x0, u.bbox.left), right = Math.min(x1, u.bbox.left + u.bbox.width);
          if (right <= left) return;
          ctx.fillStyle = i % 2 ? "rgba(120,120,200,0.10)" : "rgba(200,140,60,0.12)";
          ctx.fillRect(left, u.bbox.top, right - left, u.bbox.height);
          ctx.fillStyle = "rgba(60,60,60,0.9)";
          ctx.font = `${Math.round(11 * devicePixelRatio)}px sans-serif`;
          ctx.fillText(w.name, left + 3 * devicePixelRatio, u.bbox.top + (12 + 13 * (i % 3)) * devicePixelRatio);
        });
        ctx.restore();
      }],
    },
  };
}

function powerChart(el, data, title, yMax) {
  const tl = data.timeline;
  const series = [{ label: "time", value: (u, v) => fmt(v, 2, "s") }];
  data.devices.forEach((d, i) => series.push({
    label: d.label,
    stroke: COLORS[i % COLORS.length],
    width: 1.5,
    value: (u, v) => fmt(v, 1, "W"),
  }));
  const opts = {
    title: title || "Power per device",
    width: Math.max(600, el.clientWidth || 900),
    height: 360,
    series,
    // Compared runs share the power axis so their heights can be read against each other.
    scales: { x: { time: false }, y: yMax ? { range: [0, yMax] } : {} },
    axes: [{ label: "time since the start (s)" }, { label: "power (W)", size: 60 }],
    plugins: [windowsPlugin(data.windows)],
    cursor: { drag: { x: true, y: false } },
  };
  return new uPlot(opts, [tl.t, ...tl.series], el);
}

function profileChart(el, pl) {
  const rows = pl.profile.slice().sort((a, b) => a.power_limit_w - b.power_limit_w);
  const x = rows.map((r) => r.power_limit_w);
  const chosenPoint = (u, seriesIdx, idx) => x[idx] === pl.chosen_w;
  const opts = {
    title: "Power-limit optimizer profile" + (pl.chosen_w != null ? ` (chosen: ${pl.chosen_w} W)` : ""),
    width: Math.max(600, el.clientWidth || 900),
    height: 280,
    scales: { x: { time: false }, e: {}, t: {} },
    series: [
      { label: "power limit", value: (u, v) => fmt(v, 0, "W") },
      { label: "energy", scale: "e", stroke: COLORS[0], width: 2, value: (u, v) => fmt(v, 2, "J"),
        points: { size: 8, filter: (u, s, show) => (show ? null : x.map((_, i) => i).filter((i) => chosenPoint(u, s, i))) } },
      { label: "time", scale: "t", stroke: COLORS[3], width: 2, dash: [6, 4], value: (u, v) => fmt(v, 3, "s") },
    ],
    axes: [
      { label: "power limit (W)" },
      { scale: "e", label: "energy (J)", size: 60 },
      // Profiled times often differ in the 3rd or 4th digit: enough digits to tell the ticks apart.
      { scale: "t", label: "time (s)", side: 1, size: 70, grid: { show: false },
        values: (u, vals) => vals.map((v) => v.toPrecision(4)) },
    ],
    plugins: [{
      hooks: {
        draw: [(u) => {
          if (pl.chosen_w == null) return;
          const cx = u.valToPos(pl.chosen_w, "x", true);
          const ctx = u.ctx;
          ctx.save();
          ctx.strokeStyle = "#009E73";
          ctx.lineWidth = 2 * devicePixelRatio;
          ctx.setLineDash([4 * devicePixelRatio, 3 * devicePixelRatio]);
          ctx.beginPath();
          ctx.moveTo(cx, u.bbox.top);
          ctx.lineTo(cx, u.bbox.top + u.bbox.height);
          ctx.stroke();
          ctx.restore();
        }],
      },
    }],
  };
  return new uPlot(opts, [x, rows.map((r) => r.energy_j), rows.map((r) => r.time_s)], el);
}

function main() {
  const data = JSON.parse(document.getElementById("erg-data").textContent);
  // The charts, for tests and for anyone poking at the page from the console.
  window.ergCharts = {};
  if (data.runs) {
    // erg report --compare: one chart per run on a common power axis.
    let top = 0;
    for (const r of data.runs)
      for (const s of r.timeline.series) for (const v of s) if (v != null && v > top) top = v;
    window.ergCharts.runs = data.runs.map((r, i) =>
      powerChart(document.getElementById(`power-chart-${i}`), r, `Power per device: ${r.name}`, top * 1.05));
    document.body.dataset.ready = "true";
    return;
  }
  const power = document.getElementById("power-chart");
  if (power && data.devices.length) window.ergCharts.power = powerChart(power, data);
  const profile = document.getElementById("profile-chart");
  if (profile && data.power_limit && data.power_limit.profile.length)
    window.ergCharts.profile = profileChart(profile, data.power_limit);
  document.body.dataset.ready = "true";
}

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", main);
else main();
