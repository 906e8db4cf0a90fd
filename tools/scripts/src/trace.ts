/**
 * `npm run trace -- FILE [--migration NAME] [--trace ID]`: renders one trace from a trace file (written by
 * `npm start -- --traces FILE`) as a waterfall in the terminal and as an SVG beside FILE.
 */
import { writeFileSync } from "node:fs";
import { parseScriptArgs, usageError } from "./script-args.ts";
import { buildTrees, findMigrationTrace, readTraceFile } from "./trace/trace-file.ts";
import { renderSvg, renderText } from "./trace/waterfall.ts";

const USAGE = `usage: npm run trace -- FILE [--migration NAME] [--trace TRACE_ID]

Renders one trace of FILE (written by npm start -- --traces FILE) as a waterfall, and as an SVG beside FILE.
  --migration NAME   the trace of this migration (default: the newest trace with a migration)
  --trace TRACE_ID   this trace
  -h, --help         print this usage`;

const { values, positionals } = parseScriptArgs(USAGE, {
  options: { migration: { type: "string" }, trace: { type: "string" } },
  allowPositionals: true,
});
const file = positionals[0];
if (!file || positionals.length > 1)
  usageError(USAGE, file ? `unexpected argument "${positionals[1]}"` : "missing FILE");
const { spans, badLines } = readTraceFile(file);
if (badLines) process.stderr.write(`warning: skipped ${badLines} malformed line(s) in ${file}\n`);
const traceId = values.trace ?? findMigrationTrace(spans, values.migration);
if (!traceId) {
  const what = values.migration ? `migration "${values.migration}"` : "any migration";
  process.stderr.write(`No trace for ${what} in ${file} (${spans.length} spans). Pass --trace ID to pick one.\n`);
  process.exit(1);
}
const roots = buildTrees(spans.filter((s) => s.traceId === traceId));
process.stdout.write(renderText(roots));
const svgPath = `${file.replace(/\.[^./]+$/, "")}-${traceId.slice(0, 8)}.svg`;
writeFileSync(svgPath, renderSvg(roots));
process.stdout.write(`SVG: ${svgPath}\n`);
