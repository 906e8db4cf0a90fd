/** Writes the dashboards to tools/monitoring/dashboards/ (run: npm run gen -w @kvt/monitoring). */
import { writeFileSync } from "node:fs";
import { DASHBOARDS, renderDashboard } from "./dashboards.ts";

const dir = new URL("../dashboards/", import.meta.url).pathname;
for (const [file, d] of Object.entries(DASHBOARDS)) {
  writeFileSync(`${dir}${file}`, `${JSON.stringify(renderDashboard(d), null, 2)}\n`);
  process.stdout.write(`wrote ${dir}${file}\n`);
}
