/**
 * Finds a launcher's process on this node from its pod (virt-handler runs with `hostPID`, so /proc lists every
 * container's processes), as KubeVirt's handler finds the launcher's pid to enter its namespaces:
 *
 *   /proc/<pid>/cgroup names the pod:  .../kubepods/besteffort/pod<uid>/<container>   (cgroupfs driver)
 *                                      .../kubepods-besteffort-pod<uid with _>.slice/... (systemd driver)
 *   /proc/<pid>/root<socket in pod>    is the very socket the handler talks to (same device and inode): the
 *                                      process is in the launcher's container, not the pod's sandbox or
 *                                      guest-console-log
 *
 * The first process that passes both is the launcher's; its /proc/<pid>/ns/net is the pod's network namespace.
 */
import { readdir, readFile, stat } from "node:fs/promises";
import { join } from "node:path";

/** The pod uid in a /proc/<pid>/cgroup text, in its API form (dashes), or undefined when it names no pod. */
export function podUidOfCgroup(cgroup: string): string | undefined {
  const m = /pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})(?:\.slice)?(?:\/|$)/m.exec(
    cgroup,
  );
  return m?.[1]?.replaceAll("_", "-");
}

/** The real uid in a /proc/<pid>/status text, or undefined. */
export function uidOfStatus(status: string): number | undefined {
  const m = /^Uid:\s+(\d+)/m.exec(status);
  return m ? Number(m[1]) : undefined;
}

/** What finding a launcher's process looks for. */
export interface LauncherProcessQuery {
  /** The launcher pod's uid. */
  readonly podUid: string;
  /** The launcher's socket as the handler reaches it (through the kubelet's pods directory). */
  readonly socketOnNode: string;
  /** The same socket inside the launcher's container (/var/run/kubevirt/sockets/launcher-sock). */
  readonly socketInPod: string;
  /** Where the node's processes are listed (default /proc; tests pass a tree of their own). */
  readonly procRoot?: string;
}

/**
 * The pid of a process of the launcher's container, or undefined when none is found (the pod's processes are not
 * in this PID namespace, or the launcher has exited). Rejects only when the handler's own view of the socket is gone.
 */
export async function findLauncherPid(query: LauncherProcessQuery): Promise<number | undefined> {
  const procRoot = query.procRoot ?? "/proc";
  const socket = await stat(query.socketOnNode);
  const pids = (await readdir(procRoot)).filter((n) => /^\d+$/.test(n)).map(Number);
  pids.sort((a, b) => a - b);
  for (const pid of pids) {
    const dir = join(procRoot, String(pid));
    const cgroup = await readFile(join(dir, "cgroup"), "utf8").catch(() => ""); // gone meanwhile, or not ours to read
    if (podUidOfCgroup(cgroup) !== query.podUid) continue;
    const there = await stat(join(dir, "root", query.socketInPod)).catch(() => undefined);
    if (there && there.ino === socket.ino && there.dev === socket.dev) return pid;
  }
  return undefined;
}
