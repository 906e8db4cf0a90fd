/**
 * A pod's network sandbox on a process-kubelet node, as a container runtime's CRI RunPodSandbox /
 * StopPodSandbox wire it: a named network namespace per pod, `lo` up by the loopback plugin, `eth0` on the
 * cluster's bridge by the bridge plugin with host-local IPAM (this node's /24), then portmap for the containers'
 * hostPorts. The kubelet starts the pod's containers inside it (`inSandbox`), reports its IPs in status.podIPs,
 * and tears it down when the pod goes.
 *
 *   attach(pod):  netns exists and a cached result passes CHECK  -> reuse it (a restarted kubelet adopting pods)
 *                 otherwise: DEL leftovers, ip netns add, ADD lo, ADD eth0 list, cache the result
 *   detach(uid):  DEL eth0 list (reverse), ip netns delete, drop the cache
 */
import { execFile } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import type { PodNetworkConfig } from "./cluster-network.ts";
import { CNI_VERSION, type CniConfList, type CniResult, CniRuntime } from "./cni.ts";

const exec = promisify(execFile);

/** The interface name of the pod network inside a pod (as every CNI-driven runtime names it). */
export const POD_INTERFACE = "eth0";

/** What the sandbox needs to know about a pod. */
export interface SandboxPod {
  readonly uid: string;
  readonly namespace: string;
  readonly name: string;
  /** The containers' hostPorts (portmap's `portMappings` capability). */
  readonly portMappings?: readonly PortMapping[];
}

/** One hostPort, in portmap's runtime-config shape. */
export interface PortMapping {
  readonly hostPort: number;
  readonly containerPort: number;
  readonly protocol: string;
}

/** A pod's wired network namespace. */
export interface PodSandbox {
  /** The namespace's path (/run/netns/<name>): containers join it. */
  readonly netnsPath: string;
  /** The pod's addresses on the pod network (no prefix length), IPv4 first. */
  readonly ips: readonly string[];
}

interface CachedSandbox {
  readonly netns: string;
  readonly result: CniResult;
  readonly portMappings: readonly PortMapping[];
}

/** The conflist a node's pods are attached with (pure). */
export function podNetworkConfList(config: PodNetworkConfig, nodeCidr: string): CniConfList {
  const base = nodeCidr.split("/")[0].split(".").slice(0, 3).join(".");
  return {
    cniVersion: CNI_VERSION,
    name: "kvt-pod-network",
    plugins: [
      {
        type: "bridge",
        bridge: config.bridge,
        // The cluster gave the bridge its address; isGateway would also switch on the host's ip_forward.
        isGateway: false,
        ipMasq: false,
        hairpinMode: true,
        ipam: {
          type: "host-local",
          dataDir: join(config.stateDir, "ipam"),
          ranges: [
            [
              {
                subnet: config.clusterCidr,
                rangeStart: `${base}.2`,
                rangeEnd: `${base}.254`,
                gateway: config.gateway,
              },
            ],
          ],
          // No default route: only the cluster's /16 (the interface's own prefix) and the Services' ClusterIPs
          // (through the host, where the service proxy's rules send them on) are reachable from a pod.
          routes: config.serviceCidr ? [{ dst: config.serviceCidr, gw: config.gateway }] : [],
        },
      },
      { type: "portmap", capabilities: { portMappings: true }, snat: true },
    ],
  };
}

const LOOPBACK: CniConfList = { cniVersion: CNI_VERSION, name: "kvt-loopback", plugins: [{ type: "loopback" }] };

/** Wires pods of one node into the cluster's pod network. */
export class PodNetwork {
  readonly #config: PodNetworkConfig;
  readonly #list: CniConfList;
  readonly #cni: CniRuntime;

  constructor(config: PodNetworkConfig, nodeName: string, cni = new CniRuntime([config.cniBinDir])) {
    const nodeCidr = config.nodeCidrs[nodeName];
    if (!nodeCidr) throw new TypeError(`the pod network has no range for node "${nodeName}"`);
    this.#config = config;
    this.#list = podNetworkConfList(config, nodeCidr);
    this.#cni = cni;
  }

  /** The network namespace name of a pod. */
  netnsName(uid: string): string {
    return `${this.#config.netnsPrefix}${uid}`;
  }

  /** Creates (or, when it exists and passes CHECK, adopts) the pod's sandbox. Rejects with a CniError. */
  async attach(pod: SandboxPod): Promise<PodSandbox> {
    const name = this.netnsName(pod.uid);
    const netnsPath = join("/run/netns", name);
    // The pairs a Kubernetes container runtime passes (plugins that do not know them ignore them).
    const args = {
      K8S_POD_NAMESPACE: pod.namespace,
      K8S_POD_NAME: pod.name,
      K8S_POD_INFRA_CONTAINER_ID: pod.uid,
      K8S_POD_UID: pod.uid,
    };
    const at = { containerId: pod.uid, netns: netnsPath, ifName: POD_INTERFACE, args };
    const cached = this.#readCache(pod.uid);
    if (cached && existsSync(netnsPath)) {
      try {
        await this.#cni.check(this.#list, at, cached.result, { portMappings: cached.portMappings });
        return { netnsPath, ips: ipsOf(cached.result) };
      } catch {
        // The sandbox is damaged (an interface or reservation went missing): rebuild it from scratch below.
      }
    }
    await this.detach(pod.uid);
    await exec("ip", ["netns", "add", name]);
    try {
      await this.#cni.add(LOOPBACK, { ...at, ifName: "lo" });
      const portMappings = pod.portMappings ?? [];
      const result = await this.#cni.add(this.#list, at, { portMappings });
      this.#writeCache(pod.uid, { netns: name, result, portMappings });
      return { netnsPath, ips: ipsOf(result) };
    } catch (err) {
      await this.detach(pod.uid).catch(() => undefined); // best effort: the ADD's error is the one to report
      throw err;
    }
  }

  /** Removes the pod's sandbox (CNI DEL, then the namespace). Idempotent; rejects with the first CniError. */
  async detach(uid: string): Promise<void> {
    const name = this.netnsName(uid);
    const netnsPath = join("/run/netns", name);
    const cached = this.#readCache(uid);
    const present = existsSync(netnsPath);
    let failure: Error | undefined;
    try {
      // DEL releases the IPAM reservation even when the namespace is gone (CNI_NETNS may then be empty).
      await this.#cni.del(
        this.#list,
        { containerId: uid, netns: present ? netnsPath : "", ifName: POD_INTERFACE },
        cached?.result,
        {
          portMappings: cached?.portMappings ?? [],
        },
      );
    } catch (err) {
      failure = err as Error;
    }
    if (present) await exec("ip", ["netns", "delete", name]).catch(() => undefined); // deleted meanwhile
    rmSync(this.#cacheFile(uid), { force: true });
    if (failure) throw failure;
  }

  /**
   * The addresses of the pod's sandbox as a kubelet (this one or an earlier one) recorded them, without touching
   * the namespace: what a restarted kubelet reports before it has checked the sandbox again.
   */
  recordedIps(uid: string): string[] | undefined {
    const cached = this.#readCache(uid);
    return cached ? ipsOf(cached.result) : undefined;
  }

  #cacheFile(uid: string): string {
    return join(this.#config.stateDir, "pods", `${uid}.json`);
  }

  #readCache(uid: string): CachedSandbox | undefined {
    try {
      return JSON.parse(readFileSync(this.#cacheFile(uid), "utf8")) as CachedSandbox;
    } catch {
      return undefined; // never attached here, or a torn write: attach rebuilds, detach deletes without it
    }
  }

  #writeCache(uid: string, cached: CachedSandbox): void {
    mkdirSync(join(this.#config.stateDir, "pods"), { recursive: true });
    writeFileSync(this.#cacheFile(uid), JSON.stringify(cached));
  }
}

/** The addresses of a CNI result, without prefix lengths, IPv4 first (status.podIPs order). */
export function ipsOf(result: CniResult): string[] {
  const ips = (result.ips ?? []).map((ip) => ip.address.split("/")[0]);
  return [...ips.filter((ip) => !ip.includes(":")), ...ips.filter((ip) => ip.includes(":"))];
}

/** The command line that runs `argv` inside the sandbox's network namespace (nsenter execs it: same pid). */
export function inSandbox(argv: readonly string[], sandbox: PodSandbox): string[] {
  return ["nsenter", `--net=${sandbox.netnsPath}`, "--", ...argv];
}
