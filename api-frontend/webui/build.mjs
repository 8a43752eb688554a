// Builds the web UI bundle into static/app/ (embedded by the Go package):
// the pages from web/, and one script and one stylesheet per page under
// static/app/assets/. Usage: node build.mjs [--watch]
import { build, context } from "esbuild";
import { cpSync, mkdirSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, "static", "app");
const watch = process.argv.includes("--watch");

rmSync(out, { recursive: true, force: true });
mkdirSync(join(out, "assets"), { recursive: true });
for (const page of ["index.html", "dashboard.html"]) cpSync(join(here, "web", page), join(out, page));

const options = {
  entryPoints: { playground: join(here, "src/playground.ts"), dashboard: join(here, "src/dashboard.ts") },
  outdir: join(out, "assets"),
  bundle: true,
  format: "esm",
  target: ["es2022"],
  minify: !watch,
  sourcemap: watch ? "inline" : false,
  legalComments: "eof",
  logLevel: "info",
};
if (watch) {
  const ctx = await context(options);
  await ctx.watch();
} else {
  await build(options);
}
