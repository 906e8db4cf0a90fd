/**
 * The cloud-init NoCloud seed as an initramfs segment, for guests booted directly (linux-boot.ts) on a VMM without
 * block devices: the seed's files land in the guest's rootfs at /run/cidata, where the demo image's init looks
 * before it searches for a `cidata` disk (tools/images/src/guest/init.sh).
 *
 *   { userData, metaData, networkConfig } --> newc cpio: run/, run/cidata/, run/cidata/{meta-data,user-data,...}
 *   --> Vm.create({ boot: { kind: "linux", ..., extraInitrd: [seed] } })   (appended after the image's initramfs)
 *
 * newc entry := "070701" + 13 fields of 8 hex digits, name + NUL padded to 4, data padded to 4; ends with TRAILER!!!
 */

/** The NoCloud files. `metaData` is always written (the init takes its presence as "a seed exists"). */
export interface NoCloudSeed {
  readonly userData?: string;
  readonly metaData: string;
  readonly networkConfig?: string;
}

/** Where the seed's files appear in the guest. */
export const SEED_DIR = "run/cidata";

const enc = new TextEncoder();

function pad4(n: number): number {
  return (4 - (n % 4)) % 4;
}

function entry(ino: number, name: string, mode: number, data: Uint8Array): Uint8Array[] {
  const nameBytes = enc.encode(`${name}\0`);
  const fields = [ino, mode, 0, 0, 1, 0, data.length, 0, 0, 0, 0, nameBytes.length, 0];
  const header = enc.encode(`070701${fields.map((f) => f.toString(16).padStart(8, "0")).join("")}`);
  return [
    header,
    nameBytes,
    new Uint8Array(pad4(header.length + nameBytes.length)),
    data,
    new Uint8Array(pad4(data.length)),
  ];
}

/** A newc cpio archive of the seed, to pass as `extraInitrd`. */
export function noCloudSeedInitrd(seed: NoCloudSeed): Uint8Array {
  const files: [string, string][] = [["meta-data", seed.metaData]];
  if (seed.userData !== undefined) files.push(["user-data", seed.userData]);
  if (seed.networkConfig !== undefined) files.push(["network-config", seed.networkConfig]);
  const parts: Uint8Array[] = [
    ...entry(1, "run", 0o040755, new Uint8Array()),
    ...entry(2, SEED_DIR, 0o040755, new Uint8Array()),
    ...files.flatMap(([name, text], i) => entry(3 + i, `${SEED_DIR}/${name}`, 0o100644, enc.encode(text))),
    ...entry(0, "TRAILER!!!", 0, new Uint8Array()),
  ];
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}
