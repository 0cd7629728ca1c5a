// Bundles src/main.js with uPlot into one minified IIFE and one CSS file for erg report to
// inline: `node build.mjs OUT.js OUT.css`. Reproducible: pinned versions (package-lock.json), no
// source maps, no timestamps, paths relative to this folder; check-bundle compares a fresh build
// with the committed assets byte for byte.
import { build } from "esbuild";
import { writeFileSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";

const [outJs, outCss] = process.argv.slice(2);
if (!outJs || !outCss) {
  console.error("usage: node build.mjs OUT.js OUT.css");
  process.exit(2);
}
const here = dirname(fileURLToPath(import.meta.url));
// uPlot is MIT-licensed: its notice travels with every page that carries its code.
const uplotVersion = JSON.parse(readFileSync(join(here, "node_modules/uplot/package.json"), "utf8")).version;
const license = readFileSync(join(here, "node_modules/uplot/LICENSE"), "utf8").trim().replaceAll("*/", "* /");
const banner = `/*! uPlot ${uplotVersion} (https://github.com/leeoniya/uPlot)\n${license}\n*/`;
const tmp = mkdtempSync(join(tmpdir(), "erg-report-"));
try {
  await build({
    absWorkingDir: here,
    entryPoints: ["src/main.js"],
    bundle: true,
    minify: true,
    format: "iife",
    target: ["es2019"],
    legalComments: "inline",
    charset: "utf8",
    outfile: join(tmp, "bundle.js"),
    logLevel: "warning",
    banner: { js: banner, css: banner },
  });
  // "</" could end the inline <script>/<style> it goes into: escaped the way JS and CSS both read.
  const js = readFileSync(join(tmp, "bundle.js"), "utf8").replaceAll("</", "<\\/");
  const css = readFileSync(join(tmp, "bundle.css"), "utf8");
  if (css.includes("</")) throw new Error("the CSS holds '</'");
  writeFileSync(outJs, js);
  writeFileSync(outCss, css);
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
