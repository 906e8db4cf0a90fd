/**
 * The cloud-init NoCloud seed: an ISO9660 image labelled `cidata` holding `user-data`, `meta-data` and, when given,
 * `network-config`, written with Debian's genisoimage (Joliet + Rock Ridge, so names keep their case and dashes).
 * The guest finds it by its label, as cloud-init's NoCloud datasource does.
 */
import { execFile } from "node:child_process";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { type CloudInitNoCloud, defaultMetaData } from "../machine.ts";

const run = promisify(execFile);

/** Writes `<workDir>/cidata.iso` for `data`; returns its path. */
export async function buildSeedImage(workDir: string, vmiKey: string, data: CloudInitNoCloud): Promise<string> {
  const dir = join(workDir, "cidata");
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const files = ["user-data", "meta-data"];
  writeFileSync(join(dir, "user-data"), data.userData ?? "");
  writeFileSync(join(dir, "meta-data"), data.metaData ?? defaultMetaData(vmiKey));
  if (data.networkData !== undefined) {
    writeFileSync(join(dir, "network-config"), data.networkData);
    files.push("network-config");
  }
  const iso = join(workDir, "cidata.iso");
  await run("genisoimage", ["-quiet", "-output", iso, "-volid", "cidata", "-joliet", "-rock", ...files], { cwd: dir });
  rmSync(dir, { recursive: true, force: true });
  return iso;
}
