/**
 * Where a launcher listens: `<socketDir>/launcher-<key>.sock`, one directory per node (KubeVirt keeps its
 * `launcher-sock` in a per-pod directory the handler can reach). The key is derived from the launcher Pod's UID
 * when known (unique per launcher, also for a migration target of the same VMI), else from the VMI's UID. A handler lists the
 * directory to find every launcher on its node, also after its own restart; each answers `/v1/info` with its VMI.
 * Unix socket paths are limited to 107 bytes, so keep `socketDir` short.
 */
import { join } from "node:path";

const KEY = /^[A-Za-z0-9_.-]{1,64}$/;

/** The socket path for `key` under `socketDir`. Throws a RangeError for a key that is not a plain name. */
export function launcherSocketPath(socketDir: string, key: string): string {
  if (!KEY.test(key)) throw new RangeError(`Cannot use ${JSON.stringify(key)} as a launcher socket key`);
  return join(socketDir, `launcher-${key}.sock`);
}

/** True for a file name {@link launcherSocketPath} makes. */
export function isLauncherSocketName(fileName: string): boolean {
  return fileName.startsWith("launcher-") && fileName.endsWith(".sock") && KEY.test(fileName.slice(9, -5));
}
