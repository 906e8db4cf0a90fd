/**
 * Where a launcher listens, and where a handler finds it.
 *
 * In a launcher Pod (KubeVirt's layout, pkg/virt-handler/cmd-client): the compute container mounts the pod's
 * `sockets` emptyDir at /var/run/kubevirt/sockets and listens on `launcher-sock` there; virt-handler, which mounts
 * the kubelet's pods directory (KubeVirt: /var/lib/kubelet/pods, shortened to /pods), reaches it on the host at
 *
 *   <kubelet pods dir>/<pod uid>/volumes/kubernetes.io~empty-dir/sockets/launcher-sock
 *
 * A launcher run by hand (no pod) listens in a directory it is given (`--socket-dir`) as
 * `<socketDir>/launcher-<key>.sock`, so several can share one directory: the key is derived from the launcher Pod's
 * UID when known, else from the VMI's UID. Either way the handler learns who is behind a socket from `/v1/info`, not
 * from its name. Unix socket paths are limited to 107 bytes, so keep these directories short.
 */
import { join } from "node:path";

const KEY = /^[A-Za-z0-9_.-]{1,64}$/;

/** The launcher's socket file name in its pod's `sockets` volume (KubeVirt's StandardLauncherSocketFileName). */
export const LAUNCHER_SOCKET_NAME = "launcher-sock";

/** The launcher pod's emptyDir holding the socket (@kvt/api SOCKETS_VOLUME; this lib does not depend on the API). */
const SOCKETS_VOLUME = "sockets";

/** The socket path for `key` under `socketDir` (a launcher run by hand). Throws a RangeError for a bad key. */
export function launcherSocketPath(socketDir: string, key: string): string {
  if (!KEY.test(key)) throw new RangeError(`Cannot use ${JSON.stringify(key)} as a launcher socket key`);
  return join(socketDir, `launcher-${key}.sock`);
}

/** True for a file name {@link launcherSocketPath} makes. */
export function isLauncherSocketName(fileName: string): boolean {
  return fileName.startsWith("launcher-") && fileName.endsWith(".sock") && KEY.test(fileName.slice(9, -5));
}

const POD_UID = /^[A-Za-z0-9][A-Za-z0-9-]{0,63}$/;

/**
 * The host directory of pod `podUid`'s `sockets` emptyDir under the kubelet's pods directory (KubeVirt's
 * SocketDirectoryOnHost). Throws a RangeError for a uid that is not a plain name (it must not leave `podsDir`).
 */
export function podSocketDir(podsDir: string, podUid: string): string {
  if (!POD_UID.test(podUid)) throw new RangeError(`Cannot use ${JSON.stringify(podUid)} as a pod uid`);
  return join(podsDir, podUid, "volumes", "kubernetes.io~empty-dir", SOCKETS_VOLUME);
}

/** The launcher socket of pod `podUid` on the host (KubeVirt's SocketFilePathOnHost). */
export function podSocketPath(podsDir: string, podUid: string): string {
  return join(podSocketDir(podsDir, podUid), LAUNCHER_SOCKET_NAME);
}

/** True for a directory entry of the kubelet's pods directory that can be a pod uid. */
export function isPodUid(name: string): boolean {
  return POD_UID.test(name);
}
