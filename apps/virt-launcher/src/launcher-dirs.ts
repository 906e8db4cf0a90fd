/**
 * Where virt-launcher listens and keeps its files (pure but for existence checks on a real node).
 *
 *   pod volume (KubeVirt's name, mount)             used for                              run by hand (no such mount)
 *   sockets   /var/run/kubevirt/sockets            launcher-sock and the fencing lock     --socket-dir / KUBEVIRT_SOCKET_DIR,
 *                                                                                          launcher-<key>.sock
 *   private   /var/run/kubevirt-private            scratch (ISOs, QEMU's sockets), the    --pod-dir / KUBEVIRT_POD_DIR, else
 *                                                  console log <vmi uid>/virt-serial0-log a temporary directory
 *
 * Under the local process-kubelet the mounts come as KVT_VOLUME_MOUNTS (mountPath -> host path); on a real node there
 * is no such table and the mount paths are real.
 */
import { existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { VIRT_PRIVATE_DIR, VIRT_SOCKETS_DIR } from "@kvt/api";
import { LAUNCHER_SOCKET_NAME, launcherSocketPath } from "@kvt/launcher-rpc";
import { hostPathOf, type VolumeMount } from "./vmi/disks.ts";

/** Where the launcher listens and keeps its files. */
export interface LauncherDirs {
  /** Where the socket (and the fencing lock) go. */
  readonly socketDir: string;
  /** The socket: KubeVirt's `launcher-sock` in the pod's volume, else `launcher-<key>.sock` (launcher-rpc). */
  readonly socketPath: string;
  /** True when `socketDir` is the pod's sockets volume: the socket is then KubeVirt's `launcher-sock`. */
  readonly inPod: boolean;
  /** Scratch: cloud-init and config ISOs, QEMU's sockets, ephemeral disks when no ephemeral-disks volume. */
  readonly workDir: string;
  /** The guest console log (guest-console-log follows it), if any. */
  readonly consoleLog?: string;
}

/**
 * The launcher's directories: the pod's volumes at /var/run/kubevirt/sockets and /var/run/kubevirt-private when
 * KVT_VOLUME_MOUNTS (`tableGiven`: the process-kubelet) mounts them; else the flags (a launcher run by hand); else,
 * with no table, those paths when they exist (a real node's mounts). `exists` is injectable for tests.
 */
export function launcherDirs(
  mounts: readonly VolumeMount[],
  tableGiven: boolean,
  flags: { socketDir?: string | undefined; podDir?: string | undefined; vmiUid: string; podUid?: string | undefined },
  exists: (path: string) => boolean = existsSync,
): LauncherDirs {
  const inPod = (path: string, flag: string | undefined): string | undefined => {
    if (tableGiven) return mounts.some((m) => m.mountPath === path) ? hostPathOf(path, mounts) : undefined;
    return flag === undefined && exists(path) ? path : undefined;
  };
  const podSockets = inPod(VIRT_SOCKETS_DIR, flags.socketDir);
  const podPrivate = inPod(VIRT_PRIVATE_DIR, flags.podDir);
  const workDir = podPrivate ?? flags.podDir ?? join(tmpdir(), `virt-launcher-${flags.vmiUid}`);
  // KubeVirt's <private>/<vmi uid>/virt-serial0-log; a uid that is not a plain name never makes a path.
  const uidDir = /^[A-Za-z0-9][A-Za-z0-9-]*$/.test(flags.vmiUid) ? flags.vmiUid : "";
  const consoleLog = podPrivate
    ? join(podPrivate, uidDir, "virt-serial0-log")
    : flags.podDir
      ? join(flags.podDir, "virt-serial0-log")
      : undefined;
  const socketDir = podSockets ?? flags.socketDir ?? workDir;
  return {
    socketDir,
    socketPath: podSockets
      ? join(podSockets, LAUNCHER_SOCKET_NAME)
      : launcherSocketPath(socketDir, socketKey(flags.podUid ?? flags.vmiUid)),
    inPod: podSockets !== undefined,
    workDir,
    ...(consoleLog ? { consoleLog } : {}),
  };
}

/** A short socket key from a UID: 16 hex digits (64 bits) keep names unique per node and paths short. */
function socketKey(uid: string): string {
  const hex = uid.replaceAll("-", "").toLowerCase();
  return /^[0-9a-f]{16,}$/.test(hex) ? hex.slice(0, 16) : uid;
}
