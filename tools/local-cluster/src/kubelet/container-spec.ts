/**
 * How the process-kubelet turns a Pod's container into something it can run on this machine (pure).
 *
 *   container.command[0]                   runs as
 *   ------------------------------------   -------------------------------------------------------------
 *   virt-launcher, virt-launcher-monitor   node [flags] <the node's launcher image, else apps/virt-launcher/src/main.ts>
 *                                            <command[1..]> <args>
 *   virt-tail --logfile F                  built-in: follows F, resolved through the container's emptyDir mounts
 *                                            (KubeVirt's guest-console-log mounts `private`), into the container log
 *   anything else                          not runnable: Waiting/ErrImagePull with a message saying why
 *
 * Each container gets the env it declares (literal values and the downward-API fieldRefs the launcher pod uses),
 * plus NODE_NAME, POD_NAME, POD_NAMESPACE and POD_UID; launcher processes also get NODE_COMPILE_CACHE (the node's
 * shared compile cache) when the layout names one. Nothing else is injected: whatever a launcher needs besides (its
 * socket and private directories) is a volume its pod declares, as virt-controller renders it.
 *
 * Volumes (the contract with virt-launcher; processes are not containerized, so nothing is mounted): every process
 * gets KVT_VOLUME_MOUNTS, a JSON array with one entry per volumeMount of its container whose volume the kubelet
 * provides (pod-volumes.ts), in the container's order:
 *
 *   [{"mountPath": "<volumeMount.mountPath>", "hostPath": "<absolute host directory or file>", "readOnly": <bool>}]
 *
 * hostPath is the volume's host path (+ "/" + subPath when the mount has one); readOnly is true when the mount or
 * the persistentVolumeClaim source says readOnly, and always for configMap, secret, downwardAPI and projected volumes.
 * Each volumeDevice of a Block claim (pod-volumes.ts) follows the mounts, as the same contract: the container's
 * device path resolves to the host's device node (the process opens it; there is no mount namespace to make a node
 * appear at devicePath), readOnly when the claim source says so:
 *
 *   {"mountPath": "<volumeDevice.devicePath>", "hostPath": "/dev/loopN", "readOnly": <bool>}
 *
 * A container without mounts or devices gets `[]`. A process runs at the niceness that stands in for its CPU request's cgroup
 * weight (niceForCpuRequest).
 */
import { basename, join, normalize } from "node:path";
import { SMALL_PROCESS_NODE_FLAGS } from "../cluster/js-runtime.ts";
import type { V1Container, V1Pod } from "../cluster/kube-models.ts";
import { emptyDirPath } from "./pod-volumes.ts";

/** A runnable container: a process, or the built-in file follower. */
export type ContainerPlan =
  | {
      readonly kind: "process";
      readonly name: string;
      readonly argv: readonly string[];
      readonly env: Record<string, string>;
      /** Scheduling niceness standing in for the container's cgroup CPU weight (see {@link niceForCpuRequest}). */
      readonly nice: number;
    }
  | { readonly kind: "tail"; readonly name: string; readonly file: string }
  | { readonly kind: "unrunnable"; readonly name: string; readonly reason: string; readonly message: string };

/** Where this machine keeps the programs the images map to. */
export interface RuntimeLayout {
  /** Absolute path of the repository root (apps/ live there). */
  readonly projectRoot: string;
  /** The JS runtime executable (Node 24 or Deno) used for TypeScript entry points. */
  readonly execPath: string;
  /** Extra runtime arguments before the entry point (e.g. `run -A` for Deno). */
  readonly execArgs: readonly string[];
  /**
   * Node's on-disk compile cache for the TypeScript entry points (NODE_COMPILE_CACHE), shared by the node's
   * launchers: the stand-in for an image's pre-built code. Every launcher otherwise parses and compiles its whole
   * module graph again (seconds on a loaded machine). Deno ignores it.
   */
  readonly compileCacheDir?: string;
  /**
   * The launcher entry point to run: the node's bundled launcher image (launcher-image.ts) when it was built,
   * else (absent) `apps/virt-launcher/src/main.ts`.
   */
  readonly launcherEntry?: string;
}

/** A volume of the pod, set up on this machine (pod-volumes.ts). */
export interface ResolvedVolume {
  /** Absolute host directory (or file, for a hostPath of a file). */
  readonly hostPath: string;
  /** The volume source forces read-only (persistentVolumeClaim.readOnly). */
  readonly readOnly: boolean;
  /** A raw block device (a Block claim): given through volumeDevices, never mounted. */
  readonly block?: boolean;
}

/** One entry of KVT_VOLUME_MOUNTS. */
export interface VolumeMountEntry {
  readonly mountPath: string;
  readonly hostPath: string;
  readonly readOnly: boolean;
}

/** The env variable carrying a container's volume mounts (see the header). */
export const VOLUME_MOUNTS_ENV = "KVT_VOLUME_MOUNTS";

/** The container's mounts resolved to host paths, in its volumeMounts order; mounts of unprovided volumes are left out. */
export function volumeMounts(container: V1Container, volumes: ReadonlyMap<string, ResolvedVolume>): VolumeMountEntry[] {
  const out: VolumeMountEntry[] = [];
  for (const m of container.volumeMounts ?? []) {
    const v = volumes.get(m.name);
    if (!v || v.block) continue;
    out.push({
      mountPath: m.mountPath,
      hostPath: m.subPath ? join(v.hostPath, m.subPath) : v.hostPath,
      readOnly: m.readOnly === true || v.readOnly,
    });
  }
  return out;
}

/** The container's volumeDevices of Block volumes as KVT_VOLUME_MOUNTS entries (devicePath -> device node). */
export function volumeDevices(
  container: V1Container,
  volumes: ReadonlyMap<string, ResolvedVolume>,
): VolumeMountEntry[] {
  return (container.volumeDevices ?? []).flatMap((d) => {
    const v = volumes.get(d.name);
    return v?.block ? [{ mountPath: d.devicePath, hostPath: v.hostPath, readOnly: v.readOnly }] : [];
  });
}

const LAUNCHER_COMMANDS = new Set(["virt-launcher", "virt-launcher-monitor"]);

/**
 * Node flags for launcher processes (one launcher per VMI, so its private memory is per-VMI overhead): the
 * cluster's small-process flags (js-runtime.ts). The semi-space and V8 worker thread alone took -4.5 MiB of private
 * memory per launcher (RssAnon 31.4 -> 26.8 MiB), start-up CPU unchanged. The compile-cache warm-up runs with the
 * same flags: V8 rejects a code cache made under different flags.
 */
export const NODE_LAUNCHER_FLAGS: readonly string[] = SMALL_PROCESS_NODE_FLAGS;

function fieldRefValue(pod: V1Pod, fieldPath: string): string | undefined {
  switch (fieldPath) {
    case "metadata.name":
      return pod.metadata?.name;
    case "metadata.namespace":
      return pod.metadata?.namespace;
    case "metadata.uid":
      return pod.metadata?.uid;
    case "spec.nodeName":
      return pod.spec?.nodeName;
    case "spec.serviceAccountName":
      return pod.spec?.serviceAccountName;
    case "status.podIP":
      return pod.status?.podIP ?? "127.0.0.1";
    case "status.podIPs":
      return pod.status?.podIPs?.map((p) => p.ip).join(",") ?? "127.0.0.1";
    case "status.hostIP":
      return "127.0.0.1";
    default: {
      const label = /^metadata\.labels\['(.+)'\]$/.exec(fieldPath);
      if (label) return pod.metadata?.labels?.[label[1]];
      const annotation = /^metadata\.annotations\['(.+)'\]$/.exec(fieldPath);
      return annotation ? pod.metadata?.annotations?.[annotation[1]] : undefined;
    }
  }
}

/** The environment a container process sees (its declared env, resolved; no host env leaks except PATH/HOME). */
export function containerEnv(pod: V1Pod, container: V1Container): Record<string, string> {
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    HOME: process.env.HOME ?? "/root",
    NODE_NAME: pod.spec?.nodeName ?? "",
    POD_NAME: pod.metadata?.name ?? "",
    POD_NAMESPACE: pod.metadata?.namespace ?? "",
    POD_UID: pod.metadata?.uid ?? "",
    ...nodeTracingEnv(),
  };
  for (const e of container.env ?? []) {
    if (e.value !== undefined) env[e.name] = e.value;
    else if (e.valueFrom?.fieldRef) {
      const v = fieldRefValue(pod, e.valueFrom.fieldRef.fieldPath);
      if (v !== undefined) env[e.name] = v;
    }
  }
  return env;
}

/**
 * The node's tracing configuration, passed to every container (as a node-level OpenTelemetry agent would be found
 * by pods): `KUBEVIRT_TRACES_FILE` (the local cluster's `--traces FILE`) and the standard `OTEL_*` variables, so
 * virt-launchers add their spans to the same traces as the components.
 */
export function nodeTracingEnv(source: Record<string, string | undefined> = process.env): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(source)) {
    if (v !== undefined && (k === "KUBEVIRT_TRACES_FILE" || k.startsWith("OTEL_"))) out[k] = v;
  }
  return out;
}

/** Parses a CPU quantity ("100m", "1", "0.5") into millicores; undefined when absent or unparsable. */
function cpuMillis(quantity: string | number | undefined): number | undefined {
  if (quantity === undefined) return undefined;
  const m = /^(\d+(?:\.\d+)?)(m?)$/.exec(String(quantity).trim());
  if (!m) return undefined;
  return m[2] ? Number(m[1]) : Number(m[1]) * 1000;
}

/**
 * The niceness that gives a process about the CPU weight a real kubelet gives the container through its cgroup:
 * cpu.shares = request in millicores x 1024 / 1000 (at least 2; no request = BestEffort = 2), against 1024 for
 * the system's own processes. Each nice level weighs about 1.25x, so the level is log1.25(1024 / shares), within
 * 0..19: a launcher requesting KubeVirt's default 100m runs at nice 10, so guests that spin their vCPUs (the test
 * guest busy-waits) cannot starve the control plane, as on a real node.
 */
export function niceForCpuRequest(request: string | number | undefined): number {
  const millis = cpuMillis(request) ?? 0;
  const shares = Math.max(2, Math.floor((millis * 1024) / 1000));
  const level = Math.round(Math.log(1024 / shares) / Math.log(1.25));
  return Math.min(19, Math.max(0, level));
}

/** The value following `flag` in `args` (`--flag v` or `--flag=v`). */
function flagValue(args: readonly string[], flag: string): string | undefined {
  for (let i = 0; i < args.length; i++) {
    if (args[i] === flag) return args[i + 1];
    if (args[i].startsWith(`${flag}=`)) return args[i].slice(flag.length + 1);
  }
  return undefined;
}

/**
 * The host path of `file` inside `container` through its deepest mount of one of the pod's emptyDir volumes (their
 * place is fixed: pod-volumes.ts emptyDirPath), so it resolves before the volumes are set up (a kubelet adopting a
 * running pod); a file outside every emptyDir mount is looked for in the pod directory by its base name.
 */
function emptyDirFile(pod: V1Pod, container: V1Container, podDir: string, file: string): string {
  const emptyDirs = new Set((pod.spec?.volumes ?? []).filter((v) => v.emptyDir).map((v) => v.name));
  let best: { name: string; mountPath: string } | undefined;
  for (const m of container.volumeMounts ?? []) {
    const mountPath = m.mountPath.replace(/\/$/, "");
    if (!emptyDirs.has(m.name) || !file.startsWith(`${mountPath}/`)) continue;
    if (!best || mountPath.length > best.mountPath.length) best = { name: m.name, mountPath };
  }
  if (!best) return join(podDir, basename(file));
  const rest = normalize(file.slice(best.mountPath.length + 1));
  if (rest.startsWith("..")) return join(podDir, basename(file));
  return join(emptyDirPath(podDir, best.name), rest);
}

/** Decides how to run `container` of `pod` on this machine, given the pod's volumes as set up. */
export function planContainer(
  pod: V1Pod,
  container: V1Container,
  podDir: string,
  layout: RuntimeLayout,
  volumes: ReadonlyMap<string, ResolvedVolume> = new Map(),
): ContainerPlan {
  const command = [...(container.command ?? []), ...(container.args ?? [])];
  const program = command[0] ? basename(command[0]) : "";
  if (LAUNCHER_COMMANDS.has(program)) {
    const entry = layout.launcherEntry ?? join(layout.projectRoot, "apps/virt-launcher/src/main.ts");
    return {
      kind: "process",
      name: container.name,
      argv: [layout.execPath, ...layout.execArgs, entry, ...command.slice(1)],
      env: {
        ...containerEnv(pod, container),
        ...(layout.compileCacheDir ? { NODE_COMPILE_CACHE: layout.compileCacheDir } : {}),
        [VOLUME_MOUNTS_ENV]: JSON.stringify([
          ...volumeMounts(container, volumes),
          ...volumeDevices(container, volumes),
        ]),
      },
      nice: niceForCpuRequest(container.resources?.requests?.cpu),
    };
  }
  if (program === "virt-tail") {
    const logfile = flagValue(command, "--logfile") ?? "serial0.log";
    return { kind: "tail", name: container.name, file: emptyDirFile(pod, container, podDir, logfile) };
  }
  const what = program ? `command "${program}"` : "no command";
  return {
    kind: "unrunnable",
    name: container.name,
    reason: "ErrImagePull",
    message: `image "${container.image ?? ""}" with ${what} is not available in the local process runtime (it runs virt-launcher and virt-tail containers only)`,
  };
}
