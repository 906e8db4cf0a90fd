/**
 * `npm run build -w @kvt/images [-- --force] [--store DIR] [--test-guest ELF] [--debian-cloud]`: builds
 * local/demo-linux:latest into the image store, and registers the test guest from `--test-guest`, or from
 * native/build/guest/kvt-test-guest.elf when the native build has made it. `--debian-cloud` also builds
 * local/debian-cloud:latest (a Debian 12 disk image: minutes on a cold cache, so never by default).
 * Exit code 1 with the fix on failure.
 */
import { existsSync } from "node:fs";
import { parseArgs } from "node:util";
import { buildDebianCloud } from "./debian-cloud.ts";
import { buildDemoLinux } from "./demo-linux.ts";
import { registerTestGuest } from "./test-guest.ts";

const { values } = parseArgs({
  options: {
    force: { type: "boolean", default: false },
    store: { type: "string" },
    "test-guest": { type: "string" },
    "debian-cloud": { type: "boolean", default: false },
  },
});
try {
  const log = (line: string): void => void process.stdout.write(`[images] ${line}\n`);
  const r = await buildDemoLinux({ storeRoot: values.store, force: values.force, log });
  process.stdout.write(`${r.manifest.image}: ${r.dir}${r.skipped ? " (current)" : ""}\n`);
  const builtGuest = new URL("../../../native/build/guest/kvt-test-guest.elf", import.meta.url).pathname;
  const guest = values["test-guest"] ?? (existsSync(builtGuest) ? builtGuest : undefined);
  if (guest) {
    const t = registerTestGuest(guest, values.store);
    process.stdout.write(`${t.manifest.image}: ${t.dir}${t.skipped ? " (current)" : ""}\n`);
  }
  if (values["debian-cloud"]) {
    const d = await buildDebianCloud({ storeRoot: values.store, force: values.force, log });
    process.stdout.write(`${d.manifest.image}: ${d.dir}${d.skipped ? " (current)" : ""}\n`);
  }
} catch (err) {
  process.stderr.write(`[images] ${err instanceof Error ? err.message : String(err)}\n`);
  process.exitCode = 1;
}
