/**
 * `node bundle-cli.ts ENTRY OUT-DIR ENTRY-FILE-NAME`: bundles one entry point as `bundleEntry` does and prints the
 * bundle's path. `node bundle-cli.ts --many OUT-DIR NAME=ENTRY... [--worker NAME=ENTRY]...`: bundles several in one
 * build (`bundleEntries`; `--worker` marks a worker thread's entry) and prints a JSON object, name -> entry module. Run as a child process (`buildLauncherImage`, the local cluster's
 * component images), so the bundler's memory leaves with it.
 */
import { bundleEntries, bundleEntry } from "./launcher-image.ts";

const USAGE =
  "usage: bundle-cli.ts ENTRY OUT-DIR ENTRY-FILE-NAME | bundle-cli.ts --many OUT-DIR NAME=ENTRY... [--worker NAME=ENTRY]...\n";
const args = process.argv.slice(2);
if (args[0] === "--many") {
  const [, outDir, ...rest] = args;
  const workerPairs = rest.filter((_, i) => rest[i - 1] === "--worker");
  const pairs = rest.filter((a, i) => a !== "--worker" && rest[i - 1] !== "--worker");
  const byName = (list: string[]): Record<string, string> =>
    Object.fromEntries(list.map((p) => [p.slice(0, p.indexOf("=")), p.slice(p.indexOf("=") + 1)]));
  if (!outDir || pairs.length === 0 || [...pairs, ...workerPairs].some((p) => p.indexOf("=") <= 0)) {
    process.stderr.write(USAGE);
    process.exit(2);
  }
  process.stdout.write(JSON.stringify(await bundleEntries(byName(pairs), outDir, ".mjs", byName(workerPairs))));
} else {
  const [entry, outDir, entryFileName] = args;
  if (!entry || !outDir || !entryFileName) {
    process.stderr.write(USAGE);
    process.exit(2);
  }
  process.stdout.write(await bundleEntry(entry, outDir, entryFileName));
}
