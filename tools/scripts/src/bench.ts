/**
 * `npm run bench [-- <area> [flags]]`: runs the benchmark of every area, or of one. An area is a file named
 * `bench/<area>.bench.ts` in any project; it prints a table and, as its last line, one JSON object of its figures.
 * Flags after the area are passed to it (e.g. `npm run bench -- migration --with-qemu`).
 */
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { benchNeedsL1, HOST_FLAG, runBenchInL1 } from "@kvt/nested";
import { parseScriptArgs } from "./script-args.ts";
import { run } from "./steps.ts";

const root = new URL("../../../", import.meta.url).pathname;

/** Every area's script, by area name. */
export function discoverAreas(): Map<string, string> {
  const areas = new Map<string, string>();
  const projects: string[] = [join(root, "native"), join(root, "e2e")];
  for (const parent of ["apps", "libs", "tools"]) {
    for (const e of readdirSync(join(root, parent), { withFileTypes: true })) {
      if (e.isDirectory()) projects.push(join(root, parent, e.name));
    }
  }
  for (const project of projects) {
    const dir = join(project, "bench");
    if (!existsSync(dir)) continue;
    for (const f of readdirSync(dir)) {
      const m = /^(.+)\.bench\.ts$/.exec(f);
      if (m) areas.set(m[1], join(dir, f));
    }
  }
  return areas;
}

const USAGE = `usage: npm run bench [-- [AREA [AREA-FLAGS...]]]

Runs the benchmark of every area, or of AREA (a bench/AREA.bench.ts in any project); flags after AREA go to it,
e.g. npm run bench -- migration --with-qemu. The benches of our VMM on KVM (migration, vmm-start) run inside the
nested lane's L1 where this host's KVM cannot run Linux; after the area, --host keeps them here (a PVM host runs
their test guest), --nested sends any area into L1 (e.g. density --nested), --l1-cpus N gives L1 N vCPUs (default 1).
  -h, --help   print this usage and the areas`;

const argv = process.argv.slice(2);
// Flags before the area are ours (only --help); the area's own flags follow it and are passed through.
const firstArea = argv.findIndex((a) => !a.startsWith("-"));
parseScriptArgs(`${USAGE}\nAreas: ${[...discoverAreas().keys()].sort().join(", ") || "(none yet)"}`, {
  args: firstArea === -1 ? argv : argv.slice(0, firstArea),
});
const [area, ...rest] = firstArea === -1 ? [] : argv.slice(firstArea);
const areas = discoverAreas();
if (area && !areas.has(area)) {
  process.stderr.write(`Unknown bench area "${area}". Areas: ${[...areas.keys()].sort().join(", ") || "(none yet)"}\n`);
  process.exit(2);
}
const selected = area ? [area] : [...areas.keys()].sort();
if (selected.length === 0) {
  process.stderr.write("No bench areas exist yet.\n");
  process.exit(0);
}
let failed = 0;
for (const name of selected) {
  process.stdout.write(`\n### bench: ${name}\n`);
  // Benches of our VMM on KVM go into the nested lane's L1 where this host's KVM cannot run Linux (tools/nested);
  // an area's --help is answered here.
  const help = rest.includes("--help") || rest.includes("-h");
  const code =
    !help && benchNeedsL1(name, rest)
      ? await runBenchInL1(name, areas.get(name)!, rest, (l) => void process.stdout.write(`${l}\n`))
      : await run(process.execPath, [areas.get(name)!, ...rest.filter((a) => a !== HOST_FLAG)], { cwd: root });
  if (code !== 0) failed++;
}
process.exit(failed ? 1 : 0);
