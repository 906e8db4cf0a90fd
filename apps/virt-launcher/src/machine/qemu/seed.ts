/**
 * The cloud-init NoCloud seed: an ISO9660 image labelled `cidata` holding `user-data`, `meta-data` and, when given,
 * `network-config` (Joliet + Rock Ridge, so names keep their case and dashes), written in process by the launcher's
 * own ISO writer (volumes/iso9660.ts; no host tool). The guest finds it by its label, as cloud-init's NoCloud
 * datasource does. A fixed timestamp makes the image the same bytes wherever it is built (a migration target's).
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { writeIso9660 } from "../../volumes/iso9660.ts";
import { type CloudInitNoCloud, defaultMetaData } from "../machine.ts";

/** The date every record of the seed carries. */
const SEED_TIMESTAMP = new Date("2000-01-01T00:00:00Z");

/** Writes `<workDir>/cidata.iso` for `data`; returns its path. */
export function buildSeedImage(workDir: string, vmiKey: string, data: CloudInitNoCloud): Promise<string> {
  const files = [
    { path: "user-data", data: data.userData ?? "" },
    { path: "meta-data", data: data.metaData ?? defaultMetaData(vmiKey) },
    ...(data.networkData !== undefined ? [{ path: "network-config", data: data.networkData }] : []),
  ];
  const iso = join(workDir, "cidata.iso");
  writeFileSync(iso, writeIso9660({ volumeId: "cidata", files, timestamp: SEED_TIMESTAMP }));
  return Promise.resolve(iso);
}
