// Opens an erg report in headless Chromium (Debian's, driven by playwright-core) and checks it
// against the record it was made from. Fails on any console error, page error or request (the
// page must need nothing beyond itself).
//
//   node browser_test.mjs REPORT.html EXPECTED.json SCREENSHOT.png
//
// EXPECTED.json (written by tests/report/browser-test from the record with SQLite), or for a page of
// `erg report --compare`: {"compare": [[labels of run 1], [labels of run 2]]}.
//   {"labels": [...], "max_w": [per device], "samples0": [[t_s, power_w], ...] of the first device,
//    "profile_limits": [...], "chosen_w": W or null}
import { chromium } from "playwright-core";
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

const [reportPath, expectedPath, screenshotPath] = process.argv.slice(2);
const expected = JSON.parse(readFileSync(expectedPath, "utf8"));
const executablePath = process.env.ERG_CHROMIUM || "/usr/bin/chromium";
const problems = [];
const check = (ok, what) => {
  console.log(`${ok ? "ok  " : "FAIL"} ${what}`);
  if (!ok) problems.push(what);
};

const browser = await chromium.launch({ executablePath, args: ["--no-sandbox", "--disable-gpu"] });
try {
  const page = await browser.newPage({ viewport: { width: 1200, height: 900 }, deviceScaleFactor: 1 });
  const url = pathToFileURL(reportPath).href;
  page.on("console", (m) => { if (m.type() === "error") problems.push(`console error: ${m.text()}`); });
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("requestfailed", (r) => problems.push(`failed request: ${r.url()}`));
  // Offline: anything but the page itself is a failure (and is not fetched).
  await page.route("**/*", (route) => {
    if (route.request().url() === url) return route.continue();
    problems.push(`request for ${route.request().url()}`);
    return route.abort();
  });
  const t0 = Date.now();
  await page.goto(url);
  await page.waitForFunction(() => document.body.dataset.ready === "true", null, { timeout: 10000 });
  const loadMs = Date.now() - t0;
  console.log(`load_ms ${loadMs}`);

  if (expected.compare) {
    // erg report --compare: a chart per run, each with the run's series and legend, on one power axis.
    const runs = await page.evaluate(() => (window.ergCharts.runs || []).map((u) => ({
      labels: u.series.slice(1).map((s) => s.label),
      yMax: u.scales.y.max,
      max: Math.max(...u.data.slice(1).flat().filter((v) => v != null)),
    })));
    check(runs.length === expected.compare.length, `${runs.length} power charts for ${expected.compare.length} runs`);
    runs.forEach((r, i) => {
      check(JSON.stringify(r.labels) === JSON.stringify(expected.compare[i]), `run ${i} legend ${JSON.stringify(r.labels)}`);
      check(r.yMax === runs[0].yMax && r.yMax >= r.max, `run ${i} on the common power axis (${r.yMax} W)`);
    });
    const rows = await page.$$eval("#compare tr", (trs) => trs.map((tr) => tr.firstChild.textContent));
    check(rows.includes("energy, all devices (J)") && rows.includes("chosen power limit (W)"), "side-by-side table");
    if (screenshotPath) await page.screenshot({ path: screenshotPath, fullPage: true });
    await browser.close();
    for (const p of problems) console.error(`browser_test: ${p}`);
    process.exit(problems.length ? 1 : 0);
  }

  // Series and legend of the power chart.
  const chart = await page.evaluate(() => {
    const u = window.ergCharts.power;
    return {
      series: u.series.length - 1,
      labels: u.series.slice(1).map((s) => s.label),
      max: u.data.slice(1).map((d) => Math.max(...d.filter((v) => v != null))),
    };
  });
  check(chart.series === expected.labels.length, `power chart plots ${chart.series} series, ${expected.labels.length} recorded`);
  const legend = await page.$$eval("#power-chart .u-legend .u-series .u-label", (els) => els.map((e) => e.textContent));
  check(JSON.stringify(legend) === JSON.stringify(["time", ...expected.labels]), `legend ${JSON.stringify(legend)}`);
  expected.max_w.forEach((top, k) => {
    check(Math.abs(chart.max[k] - top) < 0.001, `${expected.labels[k]}: plotted maximum ${chart.max[k]} W = recorded ${top} W`);
  });

  // Hover over the middle of the plot and read the legend's value of the first series.
  const over = await page.$("#power-chart .u-over");
  const box = await over.boundingBox();
  await page.mouse.move(box.x + box.width * 0.5, box.y + box.height * 0.5);
  await page.waitForTimeout(100);
  const hovered = await page.evaluate(() => {
    const u = window.ergCharts.power;
    const rows = document.querySelectorAll("#power-chart .u-legend .u-series");
    return {
      idx: u.cursor.idx,
      t: u.data[0][u.cursor.idx],
      bucket: JSON.parse(document.getElementById("erg-data").textContent).timeline.bucket_s,
      time: rows[0].querySelector(".u-value").textContent,
      value: rows[1].querySelector(".u-value").textContent,
    };
  });
  console.log(`hover ${JSON.stringify(hovered)}`);
  const shown = parseFloat(hovered.value);
  check(hovered.idx != null && /^[0-9.]+ W$/.test(hovered.value), `the legend shows a value under the cursor (${hovered.value})`);
  // The value shown must be a recorded sample of that device near the hovered time (the
  // bucket it stands for, or the sample held into it).
  const near = expected.samples0.filter((p) => p[0] >= hovered.t - 2 * hovered.bucket && p[0] < hovered.t + hovered.bucket);
  const before = expected.samples0.filter((p) => p[0] < hovered.t);
  if (before.length) near.push(before[before.length - 1]);
  check(near.some((p) => Math.abs(p[1] - shown) <= 0.05),
    `hovered ${hovered.value} at ${hovered.time} is a recorded sample of ${expected.labels[0]} (${near.length} near)`);

  // The power-limit optimizer's profile.
  if (expected.profile_limits.length) {
    const profile = await page.evaluate(() => {
      const u = window.ergCharts.profile;
      return u ? { x: u.data[0], labels: u.series.map((s) => s.label) } : null;
    });
    check(profile != null, "the profile chart is drawn");
    if (profile) {
      check(JSON.stringify(profile.x) === JSON.stringify([...expected.profile_limits].sort((a, b) => a - b)),
        `profile limits ${JSON.stringify(profile.x)}`);
      check(JSON.stringify(profile.labels) === JSON.stringify(["power limit", "energy", "time"]), "profile legend");
    }
    const chosen = await page.$eval("#power-limit-profile tr.chosen td", (td) => td.textContent).catch(() => null);
    check(chosen != null && parseFloat(chosen) === expected.chosen_w, `chosen limit row ${chosen} = ${expected.chosen_w} W`);
  }
  if (screenshotPath) await page.screenshot({ path: screenshotPath, fullPage: true });
} finally {
  await browser.close();
}
for (const p of problems) console.error(`browser_test: ${p}`);
process.exit(problems.length ? 1 : 0);
