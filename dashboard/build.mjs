// Builds the dashboard into dist/ (or $DASHBOARD_OUT): app.js bundled and
// minified by esbuild, app.css and index.html copied. Nothing depends on
// the time, the machine or the checkout path, so the same sources and the
// locked esbuild give byte-identical files (make dashboard-check relies on
// it).
import * as esbuild from "esbuild";
import { copyFileSync, mkdirSync, rmSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const out = resolve(process.env.DASHBOARD_OUT || join(here, "dist"));
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
await esbuild.build({
  absWorkingDir: here,
  entryPoints: ["src/main.ts"],
  outfile: join(out, "app.js"),
  bundle: true,
  minify: true,
  format: "esm",
  target: "es2022",
  legalComments: "none",
  sourcemap: false,
  logLevel: "warning",
});
for (const f of ["index.html", "style.css"]) copyFileSync(join(here, "src", f), join(out, f === "style.css" ? "app.css" : f));
console.log("dashboard: built " + out);
