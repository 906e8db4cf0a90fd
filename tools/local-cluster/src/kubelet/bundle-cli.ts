/**
 * `node bundle-cli.ts ENTRY OUT-DIR ENTRY-FILE-NAME`: bundles one entry point as `bundleEntry` does and prints the
 * bundle's path. Run as a child process by `buildLauncherImage`, so the bundler's memory leaves with it.
 */
import { bundleEntry } from "./launcher-image.ts";

const [entry, outDir, entryFileName] = process.argv.slice(2);
if (!entry || !outDir || !entryFileName) {
  process.stderr.write("usage: bundle-cli.ts ENTRY OUT-DIR ENTRY-FILE-NAME\n");
  process.exit(2);
}
process.stdout.write(await bundleEntry(entry, outDir, entryFileName));
