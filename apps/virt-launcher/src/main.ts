#!/usr/bin/env node
/**
 * virt-launcher: composition root. Owns one VirtualMachineInstance's guest: the VMM, its console and its migration
 * data path, commanded by virt-handler over launcher-rpc on a unix socket.
 *
 * Contract with the launcher Pod (virt-controller renders it; the process-kubelet runs it):
 *   command: virt-launcher --namespace NS --name NAME --uid UID [--kubeconfig FILE] | --vmi FILE
 *   env:     POD_NAME, POD_UID (downward API metadata.name / metadata.uid), NODE_NAME, POD_IP (status.podIP:
 *            where an incoming migration listens, default 127.0.0.1; with CAP_NET_ADMIN the launcher also wires
 *            the pod-network binding: network/launcher-network.ts),
 *            KVT_IMAGE_STORE (the local image store containerDisk images resolve through),
 *            KUBEVIRT_USE_EMULATION (never | whenNeeded | always: KubeVirt's useEmulation),
 *            KVT_VOLUME_MOUNTS (the local process-kubelet's JSON [{mountPath, hostPath, readOnly}]: where the pod's
 *            volumes are on this host; absent on a real node, where the mount paths are real)
 *   volumes: the pod's `sockets` emptyDir at /var/run/kubevirt/sockets (virt-handler reaches it through the
 *            kubelet's pods directory) and `private` at /var/run/kubevirt-private (scratch; the console log
 *            <vmi uid>/virt-serial0-log that guest-console-log follows), as virt-controller renders the pod
 *   socket:  /var/run/kubevirt/sockets/launcher-sock (KubeVirt's name). Run by hand (no such mount):
 *            <--socket-dir or KUBEVIRT_SOCKET_DIR>/launcher-<16 hex digits of POD_UID, else of the VMI uid>.sock, so
 *            launchers can share a directory; scratch and console log in --pod-dir or KUBEVIRT_POD_DIR (else a
 *            temporary directory). Unix socket paths end at 107 bytes; the handler learns who is behind a socket
 *            from /v1/info, not its name
 * Fencing: before anything else that could start a guest, the launcher takes the exclusive lock of its VMI's uid
 * on this node (fencing/vmi-lock.ts) and holds it for its whole life; a second launcher for the same VMI exits 4.
 * Exit codes: 0 the guest shut down or migrated away (or SIGTERM before it started), 1 it crashed or was
 * killed, 2 bad arguments, 3 could not serve (socket, VMI lookup), 4 another launcher on this node holds the VMI.
 */
import { chmodSync, mkdirSync } from "node:fs";
import { dirname } from "node:path";
import type { Logger } from "@kvt/observability";
import { createLogger } from "@kvt/observability/logger";
import { startTracing } from "@kvt/observability/tracing";
import { main } from "@kvt/runtime";
import pkg from "../package.json" with { type: "json" };
import { markConsoleDone } from "./domain/console-log-done.ts";
import { acquireVmiLock, type VmiLock, VmiLockedError } from "./fencing/vmi-lock.ts";
import { startLauncherApp } from "./launcher-app.ts";
import { type LauncherDirs, launcherDirs } from "./launcher-dirs.ts";
import { parseUseEmulation } from "./machine/backend-choice.ts";
import { machineFactory } from "./machine/create-machine.ts";
import { type LauncherNetwork, launcherNetwork, processHoldsNetAdmin } from "./network/launcher-network.ts";
import { parseVolumeMounts, type VolumeMount } from "./vmi/disks.ts";
import { imageStoreResolver } from "./vmi/image-store.ts";
import { podImageResolver } from "./vmi/image-volumes.ts";
import { buildMachineSpec } from "./vmi/machine-spec.ts";
import { loadVmi, UsageError } from "./vmi-source.ts";

const DEFAULT_GRACE_SECONDS = 30;
/** The local image store's default root, as tools/images defines it: `<project>/.data/images`. */
const DEFAULT_IMAGE_STORE = new URL("../../../.data/images", import.meta.url).pathname;

await main({
  name: "virt-launcher",
  version: pkg.version,
  summary: "Owns one VirtualMachineInstance's guest: the VMM, its console and its migration data path.",
  usage: "(--vmi FILE | --namespace NS --name NAME [--uid UID] [--kubeconfig FILE]) [--socket-dir DIR]",
  flags: {
    vmi: { type: "string" },
    namespace: { type: "string" },
    name: { type: "string" },
    uid: { type: "string" },
    kubeconfig: { type: "string" },
    "socket-dir": { type: "string" },
    "pod-dir": { type: "string" },
    "image-store": { type: "string" },
    "console-log": { type: "string" },
    "use-emulation": { type: "string" },
    "log-level": { type: "string" },
  },
  details: [
    "  --vmi FILE            the VMI (JSON or YAML); or name it with --namespace/--name and read it with --kubeconfig,",
    "                        or give --uid and let virt-handler's first sync carry it",
    "  --socket-dir DIR      where to listen when no volume is mounted at /var/run/kubevirt/sockets (a launcher run by",
    "                        hand; env KUBEVIRT_SOCKET_DIR; default the pod dir)",
    "  --pod-dir DIR         the private directory (console log, scratch) when no volume is mounted at",
    "                        /var/run/kubevirt-private (env KUBEVIRT_POD_DIR; default a temporary directory)",
    "  --image-store DIR     the local image store (env KVT_IMAGE_STORE)",
    "  --console-log FILE    the guest console log (default <pod dir>/virt-serial0-log)",
    "  --use-emulation MODE  never | whenNeeded | always (env KUBEVIRT_USE_EMULATION; default whenNeeded)",
    "Exit codes: 0 shut down or migrated, 1 crashed or killed, 2 bad arguments, 3 could not serve,",
    "4 another virt-launcher on this node holds the VMI's lock (nothing was started).",
  ],
  async run({ values }, signal) {
    const env = process.env;
    const level = (values["log-level"] ?? env.LOG_LEVEL ?? "info") as "info";
    const logger = createLogger({ component: "virt-launcher", level });
    // Awaited import(): the bundled launcher keeps the SDK in a chunk of its own, loaded only when tracing is on.
    const tracing = await startTracing({
      serviceName: "virt-launcher",
      serviceVersion: pkg.version,
      attributes: {
        ...(env.POD_NAME ? { "k8s.pod.name": env.POD_NAME } : {}),
        ...(env.NODE_NAME ? { "k8s.node.name": env.NODE_NAME } : {}),
      },
    });
    let lock: VmiLock | undefined;
    try {
      const source = await loadVmi({
        ...(values.vmi ? { vmiFile: values.vmi } : {}),
        ...(values.namespace ? { namespace: values.namespace } : {}),
        ...(values.name ? { name: values.name } : {}),
        ...(values.uid ? { uid: values.uid } : {}),
        ...(values.kubeconfig ? { kubeconfig: values.kubeconfig } : {}),
      }).catch((error: unknown) => {
        if (error instanceof UsageError) throw error;
        throw new ServeError(`cannot read the VMI: ${(error as Error).message}`, { cause: error });
      });
      let useEmulation: ReturnType<typeof parseUseEmulation>;
      try {
        useEmulation = parseUseEmulation(values["use-emulation"] ?? env.KUBEVIRT_USE_EMULATION);
      } catch (error) {
        throw new UsageError((error as Error).message);
      }
      const podUid = env.POD_UID;
      const { mounts, dirs } = podDirs(values, source.identity.uid, podUid);
      // The fencing lock beside the socket: the pod's sockets volume, or the directory launchers run by hand share.
      lock = acquireVmiLock(dirs.socketDir, source.identity.uid);
      const { workDir } = dirs;
      const consoleLog = values["console-log"] ?? dirs.consoleLog;
      const storeRoot = values["image-store"] ?? env.KVT_IMAGE_STORE ?? DEFAULT_IMAGE_STORE;
      const log = logger.child({
        namespace: source.identity.namespace,
        name: source.identity.name,
        uid: source.identity.uid,
      });
      const network = podNetworkPlacement(log);
      const app = await startLauncherApp({
        identity: {
          ...source.identity,
          ...(env.POD_NAME ? { podName: env.POD_NAME } : {}),
          ...(podUid ? { podUid } : {}),
        },
        ...(source.vmi ? { vmi: source.vmi } : {}),
        socketPath: dirs.socketPath,
        consoleLogPath: consoleLog,
        toSpec: (vmi, role) =>
          buildMachineSpec(
            vmi,
            { resolveImage: podImageResolver(vmi, mounts, imageStoreResolver(storeRoot)), workDir, mounts },
            role,
          ),
        createMachine: machineFactory({
          logger: log,
          useEmulation,
          // In its pod's own network: the target listens on the pod IP at KubeVirt's migration port (the
          // masquerade binding never forwards it to the guest); the binding is plumbed here only by a launcher
          // holding CAP_NET_ADMIN (the process-kubelet's), else by virt-handler, see launcher-network.ts.
          ...network,
        }),
        logger: log,
      }).catch((error: unknown) => {
        throw new ServeError(`cannot serve launcher-rpc: ${(error as Error).message}`, { cause: error });
      });
      const onTerm = (): void => {
        const grace = source.vmi?.spec?.terminationGracePeriodSeconds ?? DEFAULT_GRACE_SECONDS;
        log.info({ gracePeriodSeconds: grace }, "SIGTERM: shutting the guest down");
        app.manager
          .shutdown({ gracePeriodSeconds: grace })
          .catch((error: unknown) => {
            log.error({ err: error }, "graceful shutdown failed; killing the guest");
            return app.manager.kill();
          })
          .catch((error: unknown) => log.error({ err: error }, "kill failed"));
      };
      signal.addEventListener("abort", onTerm, { once: true });
      const outcome = await app.finished;
      // No guest here any more (shut down, crashed or migrated away): a launcher of the same VMI may start (a
      // migration back to this node) while this one finishes exiting.
      lock.release();
      if (consoleLog) markConsoleDone(consoleLog); // guest-console-log's virt-tail ends: the pod can complete
      signal.removeEventListener("abort", onTerm);
      log.info({ outcome }, "guest gone; launcher exiting");
      await app.close();
      return outcome.state === "Crashed" ? 1 : 0;
    } catch (error) {
      if (error instanceof UsageError) {
        process.stderr.write(`virt-launcher: ${error.message}\n`);
        return 2;
      }
      if (error instanceof VmiLockedError) {
        logger.error({ err: error, reason: "VmiLocked" }, error.message);
        process.stderr.write(`virt-launcher: ${error.message}\n`);
        return 4;
      }
      logger.error({ err: error }, "virt-launcher cannot run");
      return 3;
    } finally {
      lock?.release();
      await tracing.shutdown();
      logger.flush();
    }
  },
});

/**
 * The pod's mounts (KVT_VOLUME_MOUNTS) and the launcher's directories (launcher-dirs.ts), made (owner-only where the
 * launcher creates them). Throws a UsageError for a malformed KVT_VOLUME_MOUNTS.
 */
function podDirs(
  values: { "socket-dir"?: string | undefined; "pod-dir"?: string | undefined },
  vmiUid: string,
  podUid: string | undefined,
): { mounts: VolumeMount[]; dirs: LauncherDirs } {
  const env = process.env;
  let mounts: VolumeMount[];
  try {
    mounts = parseVolumeMounts(env.KVT_VOLUME_MOUNTS);
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  const dirs = launcherDirs(mounts, env.KVT_VOLUME_MOUNTS !== undefined, {
    socketDir: values["socket-dir"] ?? env.KUBEVIRT_SOCKET_DIR,
    podDir: values["pod-dir"] ?? env.KUBEVIRT_POD_DIR,
    vmiUid,
    podUid,
  });
  for (const dir of [dirs.socketDir, dirs.workDir]) {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    // A pod's emptyDir comes 0777 (kubelet's mode): the sockets in it (ours, QEMU's) are for this user only. Where
    // the launcher does not own the directory (a real node's root-owned emptyDir), its container isolates it.
    try {
      chmodSync(dir, 0o700);
    } catch {
      // not ours to change
    }
  }
  if (dirs.consoleLog) mkdirSync(dirname(dirs.consoleLog), { recursive: true, mode: 0o755 });
  return { mounts, dirs };
}

/** Where this launcher is on the network (network/launcher-network.ts), logged when the node plumbs the pod. */
function podNetworkPlacement(log: Logger): LauncherNetwork {
  const podIp = process.env.POD_IP;
  const network = launcherNetwork(podIp, podIp ? processHoldsNetAdmin() : false);
  if (network.podNetworkWiring === "node")
    log.info({ podIp: network.podIp }, "no CAP_NET_ADMIN in the pod: virt-handler plumbs the pod network");
  return network;
}

/** The launcher could not start serving. */
class ServeError extends Error {
  override readonly name = "ServeError";
}
