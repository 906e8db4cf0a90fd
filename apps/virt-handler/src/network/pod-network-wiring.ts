/**
 * virt-handler's half of the pod network (KubeVirt's phase 1, pkg/network/setup in virt-handler): before it syncs a
 * VMI to its launcher (or prepares a migration target), it enters the launcher pod's network namespace and plumbs
 * the VMI's binding there with @kvt/pod-network (the same code a root launcher runs on itself), then leaves the
 * result in the launcher's private directory, where the unprivileged launcher reads it, opens the tap and serves
 * DHCP:
 *
 *   launcher pid (launcher-pid.ts) -> CapEff has NET_ADMIN? -> yes: the launcher plumbs itself, nothing to do
 *                                                           -> no: handover there already? -> yes: done (a restart)
 *                                                                  -> no: plumb in /proc/<pid>/ns/net (tap owned by
 *                                                                     the launcher's user, ports from 0 unprivileged)
 *                                                                     -> write /proc/<pid>/root<HANDOVER_FILE>
 *
 * The pod's own /dev/net/tun (the node the runtime made for the device plugin's `tun`) is given to the launcher's
 * user as well: it has the host node's mode, which may be 0600 root (this machine's), and the unprivileged launcher
 * (its VMM, or QEMU) opens it to attach to the tap. Never when it is the host's node itself (a bind mount).
 *
 * Each launcher socket is plumbed once per handler process; a failure rejects, and the runner retries the VMI.
 */
import { chown, readFile, rename, stat, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { VIRT_SOCKETS_DIR, type VirtualMachineInstance } from "@kvt/api";
import { LAUNCHER_SOCKET_NAME } from "@kvt/launcher-rpc";
import type { Logger } from "@kvt/observability";
import {
  enteredNetns,
  HANDOVER_FILE,
  holdsNetAdmin,
  type Netns,
  type PlumbedPodNetwork,
  type PlumbOptions,
  planPodNetwork,
  plumbPodNetwork,
} from "@kvt/pod-network";
import { findLauncherPid, type LauncherProcessQuery, uidOfStatus } from "./launcher-pid.ts";

/** KubeVirt's launcher user, when the process's own cannot be read. */
const LAUNCHER_USER = 107;

/** A launcher pod whose network the handler could not plumb (retried by the runner). */
export class PodNetworkSetupError extends Error {
  override name = "PodNetworkSetupError";
}

/** The launcher as the VMI controller knows it. */
export interface LauncherRef {
  readonly socketPath: string;
  readonly podUid?: string;
}

/** What the wiring uses; tests replace the process lookup and the namespace. */
export interface PodNetworkWiringDeps {
  readonly procRoot?: string;
  readonly findPid?: (query: LauncherProcessQuery) => Promise<number | undefined>;
  readonly netns?: (nsPath: string) => Netns;
  readonly plumb?: typeof plumbPodNetwork;
  /** The node's own tun device (default /dev/net/tun: the handler is privileged and sees the host's /dev). */
  readonly hostTun?: string;
}

/** Plumbs launcher pods' networks from the handler. */
export class PodNetworkWiring {
  readonly #d: PodNetworkWiringDeps;
  /** Launcher sockets whose pod is plumbed (or plumbs itself). */
  readonly #done = new Set<string>();

  constructor(deps: PodNetworkWiringDeps = {}) {
    this.#d = deps;
  }

  /**
   * Makes sure the pod of `launcher` has `vmi`'s binding before the launcher builds the guest. Resolves at once for
   * a VMI without a pod-network binding. Rejects with a PodNetworkSetupError (or the wiring's error) otherwise.
   */
  async ensure(vmi: VirtualMachineInstance, launcher: LauncherRef, log: Logger): Promise<void> {
    if (this.#done.has(launcher.socketPath)) return;
    const plan = planPodNetwork(vmi);
    if (!plan) return;
    const podUid = launcher.podUid ?? podUidOfSocket(launcher.socketPath);
    if (!podUid) throw new PodNetworkSetupError(`cannot tell the pod of the launcher at ${launcher.socketPath}`);
    const procRoot = this.#d.procRoot ?? "/proc";
    const pid = await (this.#d.findPid ?? findLauncherPid)({
      podUid,
      socketOnNode: launcher.socketPath,
      socketInPod: `${VIRT_SOCKETS_DIR}/${LAUNCHER_SOCKET_NAME}`,
      procRoot,
    });
    if (pid === undefined)
      throw new PodNetworkSetupError(`no process of launcher pod ${podUid} in ${procRoot} (is the handler hostPID?)`);
    const status = await readFile(join(procRoot, String(pid), "status"), "utf8");
    if (holdsNetAdmin(status)) {
      log.debug({ pid }, "the launcher holds CAP_NET_ADMIN: it plumbs its own pod network");
      this.#done.add(launcher.socketPath);
      return;
    }
    const owner = uidOfStatus(status) ?? LAUNCHER_USER;
    await this.#shareTun(join(procRoot, String(pid), "root", "dev/net/tun"), owner, log);
    const handover = join(procRoot, String(pid), "root", HANDOVER_FILE);
    if (await exists(handover)) {
      this.#done.add(launcher.socketPath); // plumbed by this handler before a restart
      return;
    }
    const options: PlumbOptions = { tapOwner: owner, unprivilegedPortStart: 0 };
    const nsPath = join(procRoot, String(pid), "ns", "net");
    const plumbed = await (this.#d.plumb ?? plumbPodNetwork)(
      plan,
      (this.#d.netns ?? enteredNetns)(nsPath),
      log,
      options,
    );
    await writeHandover(handover, plumbed);
    log.info(
      { pid, tap: plumbed.tap, mac: plumbed.mac, tapOwner: options.tapOwner },
      "pod network plumbed for the launcher",
    );
    this.#done.add(launcher.socketPath);
  }

  /** Gives the pod's tun device node to `owner`, unless it is the host's own node; a pod without one is left be. */
  async #shareTun(podTun: string, owner: number, log: Logger): Promise<void> {
    const inPod = await stat(podTun).catch(() => undefined);
    if (!inPod?.isCharacterDevice()) return; // no tun in the pod: the launcher's open fails and names it
    const host = await stat(this.#d.hostTun ?? "/dev/net/tun").catch(() => undefined);
    if (host && host.ino === inPod.ino && host.dev === inPod.dev) {
      log.warn({ device: podTun }, "the pod's tun device is the host's own node: its owner is left unchanged");
      return;
    }
    if (inPod.uid !== owner) await chown(podTun, owner, owner);
  }

  /** Forgets a launcher that went away (its socket may come back for another pod). */
  forget(socketPath: string): void {
    this.#done.delete(socketPath);
  }
}

/** The pod uid in a socket path under the kubelet's pods directory (`.../<uid>/volumes/.../launcher-sock`). */
export function podUidOfSocket(socketPath: string): string | undefined {
  const m = /\/([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\/volumes\//.exec(socketPath);
  return m?.[1];
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

/** Writes the handover atomically (a launcher never reads half a file), readable by the launcher's user. */
async function writeHandover(path: string, plumbed: PlumbedPodNetwork): Promise<void> {
  const tmp = join(dirname(path), `.pod-network.${process.pid}.tmp`);
  await writeFile(tmp, `${JSON.stringify(plumbed)}\n`, { mode: 0o644 });
  await rename(tmp, path);
}
