/**
 * `status`'s probes: each component's health endpoint (verified against our CAs, with a client certificate where
 * the component asks for one), its resident memory, and the nodes as the API server reports them.
 *
 *   etcd                     https://127.0.0.1:<etcd>/health          etcd-ca, etcd-healthcheck-client
 *   kube-apiserver           https://<bridge>:<apiserver>/readyz      ca, admin
 *   kube-controller-manager  https://127.0.0.1:<cm>/healthz           ca, admin
 *   kube-scheduler           https://127.0.0.1:<scheduler>/healthz    ca, admin
 *   registry                 https://<bridge>:<registry>/v2/          ca, registry-client
 *   kubelet/<node>           https://<node ip>:10250/healthz          ca, admin (the kubelet's webhook authz)
 *   kube-proxy/<node>        http://<node ip>:10256/healthz           (plain HTTP, as kube-proxy serves it)
 *   containerd/<node>        its process and its socket
 */

import { existsSync, readFileSync } from "node:fs";
import { request } from "node:https";
import { CORE_V1, kubeConfigFromFile, type Node, RestClient, resourceClient } from "@kvt/kube";
import { processAlive } from "@kvt/local-cluster";
import type { ControlPlaneLayout } from "./control-plane.ts";
import { LOCAL_BLOCK_COMPONENT } from "./local-block.ts";
import { KUBE_PROXY_HEALTHZ_PORT, nodePaths } from "./node-config.ts";
import type { ClusterNetwork } from "./node-network.ts";
import { nodeLayouts } from "./nodes.ts";
import { registryClientCert } from "./registry.ts";

/** One component's health. */
export interface ComponentHealth {
  readonly name: string;
  readonly pid?: number;
  /** Resident memory (VmRSS) of its process, when it runs. */
  readonly rssBytes?: number;
  readonly url: string;
  readonly ok: boolean;
  readonly detail: string;
}

/** The parts of a core/v1 Node that `up` and `status` read (more than @kvt/kube's Node carries). */
export interface NodeObject extends Omit<Node, "spec" | "status"> {
  spec?: NonNullable<Node["spec"]> & { podCIDR?: string };
  status?: {
    conditions?: { type: string; status: string; lastHeartbeatTime?: string }[];
    addresses?: { type: string; address: string }[];
    nodeInfo?: { kubeletVersion?: string; containerRuntimeVersion?: string };
  };
}

/** One node as the API server reports it. */
export interface NodeStatus {
  readonly name: string;
  readonly ready: boolean;
  readonly internalIp?: string;
  readonly podCidr?: string;
  readonly kubeletVersion?: string;
  readonly containerRuntimeVersion?: string;
}

/** The resident memory of `pid` in bytes (VmRSS), or undefined when it is gone. */
export function rssBytes(pid: number | undefined): number | undefined {
  if (!pid) return undefined;
  try {
    const m = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) * 1024 : undefined;
  } catch {
    return undefined;
  }
}

interface HttpsEndpoint {
  readonly host: string;
  readonly port: number;
  readonly path: string;
  readonly ca: string;
  readonly client: { readonly cert: string; readonly key: string };
}

/** The HTTPS health endpoint of a component, or undefined for containerd. */
export function healthEndpoint(
  layout: ControlPlaneLayout,
  name: string,
  net?: ClusterNetwork,
): HttpsEndpoint | undefined {
  const { pki, ports } = layout;
  const local = "127.0.0.1";
  const admin = { ca: pki.ca.cert, client: pki.admin };
  if (name === "etcd") {
    return {
      host: local,
      port: ports.etcdClient,
      path: "/health",
      ca: pki.etcdCa.cert,
      client: pki.etcdHealthcheckClient,
    };
  }
  if (name === "kube-apiserver") return { host: layout.hostIp, port: ports.apiserver, path: "/readyz", ...admin };
  if (name === "kube-controller-manager")
    return { host: local, port: ports.controllerManager, path: "/healthz", ...admin };
  if (name === "kube-scheduler") return { host: local, port: ports.scheduler, path: "/healthz", ...admin };
  if (name === "registry") {
    const client = registryClientCert(pki.dir);
    return { host: layout.hostIp, port: ports.registry, path: "/v2/", ca: pki.ca.cert, client };
  }
  const node = name.startsWith("kubelet/")
    ? net?.nodes.find((n) => n.name === name.slice("kubelet/".length))
    : undefined;
  return node ? { host: node.ip, port: 10250, path: "/healthz", ...admin } : undefined;
}

/** Probes component `name` (pid: its process, for RSS and the containerd check). */
export async function probeComponent(
  layout: ControlPlaneLayout,
  name: string,
  pid?: number,
  net?: ClusterNetwork,
): Promise<ComponentHealth> {
  const rss = rssBytes(pid);
  if (name.startsWith("kube-proxy/")) {
    const node = net?.nodes.find((n) => `kube-proxy/${n.name}` === name);
    const url = `http://${node?.ip}:${KUBE_PROXY_HEALTHZ_PORT}/healthz`;
    const answer = await fetch(url, { signal: AbortSignal.timeout(3000) }).then(
      (r) => ({ ok: r.ok, detail: String(r.status) }),
      (e: Error) => ({ ok: false, detail: e.message }),
    );
    return { name, pid, rssBytes: rss, url, ...answer };
  }
  if (name.startsWith("containerd/")) {
    const node = net ? nodeLayouts(layout.dir, net).find((n) => `containerd/${n.name}` === name) : undefined;
    const socket = node ? nodePaths(node).containerdSocket : "";
    const ok = pid !== undefined && processAlive(pid) && existsSync(socket);
    return { name, pid, rssBytes: rss, url: `unix://${socket}`, ok, detail: ok ? "running" : "not running" };
  }
  if (name === LOCAL_BLOCK_COMPONENT) {
    // A host process with no endpoint: alive is healthy (it logs each pass's failures).
    const ok = pid !== undefined && processAlive(pid);
    return { name, pid, rssBytes: rss, url: "", ok, detail: ok ? "running" : "not running" };
  }
  const e = healthEndpoint(layout, name, net);
  if (!e) return { name, pid, rssBytes: rss, url: "", ok: false, detail: "unknown component" };
  const url = `https://${e.host}:${e.port}${e.path}`;
  const [ca, cert, key] = [e.ca, e.client.cert, e.client.key].map((f) => readFileSync(f, "utf8"));
  const answer = await new Promise<{ ok: boolean; detail: string }>((resolve) => {
    const req = request({ host: e.host, port: e.port, path: e.path, ca, cert, key, timeout: 3000 }, (res) => {
      let body = "";
      res.setEncoding("utf8").on("data", (c: string) => {
        body += c;
      });
      res.on("end", () => {
        const healthy = name === "etcd" ? /"health":\s*"true"/.test(body) : name === "registry" || body.trim() === "ok";
        resolve({ ok: res.statusCode === 200 && healthy, detail: `${res.statusCode} ${body.trim().slice(0, 200)}` });
      });
    });
    req.on("timeout", () => req.destroy(new Error("timed out")));
    req.on("error", (error) => resolve({ ok: false, detail: error.message }));
    req.end();
  });
  return { name, pid, rssBytes: rss, url, ...answer };
}

/** The nodes as the API server reports them. */
export async function probeNodes(kubeconfig: string): Promise<NodeStatus[]> {
  const transport = new RestClient(kubeConfigFromFile(kubeconfig), { userAgent: "kube-status" });
  const nodes = (await resourceClient<NodeObject>(transport, CORE_V1.nodes).list()).items;
  return nodes.map((n) => ({
    name: n.metadata?.name ?? "",
    ready: n.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") ?? false,
    internalIp: n.status?.addresses?.find((a) => a.type === "InternalIP")?.address,
    podCidr: n.spec?.podCIDR,
    kubeletVersion: n.status?.nodeInfo?.kubeletVersion,
    containerRuntimeVersion: n.status?.nodeInfo?.containerRuntimeVersion,
  }));
}
