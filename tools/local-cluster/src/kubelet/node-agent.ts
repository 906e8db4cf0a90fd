/**
 * One simulated node: registers the Node, serves container logs, heartbeats every 10 s (and when a device plugin's
 * devices change), serves the device plugin API (device-plugins/), and runs the Kubelet.
 * The composition the kubelet's main.ts and the local-cluster supervisor both use.
 */
import { cpus, release, totalmem } from "node:os";
import { join } from "node:path";
import { generateCa, issueCertificate } from "@kvt/certs";
import { CORE_V1, isAlreadyExists, type RestTransport, resourceClient } from "@kvt/kube";
import type { Logger } from "@kvt/observability";
import type { V1Node } from "../cluster/kube-models.ts";
import type { KubeletNetwork } from "../network/kubelet-network.ts";
import type { RuntimeLayout } from "./container-spec.ts";
import { DeviceManager } from "./device-plugins/device-manager.ts";
import { Kubelet } from "./kubelet.ts";
import { type LogServerTls, startLogServer } from "./log-server.ts";
import { type NodeFacts, nodeObject, nodeStatus } from "./node-status.ts";

/** Heartbeat period of the node status (the real kubelet's nodeStatusUpdateFrequency is 10 s). */
export const HEARTBEAT_MS = 10_000;
/** How soon after a device plugin's change the node status is written. */
const DEVICE_STATUS_DELAY_MS = 100;

/** A running node. */
export interface NodeAgent {
  readonly nodeName: string;
  readonly kubelet: Kubelet;
  stop(): Promise<void>;
}

/** Starts a node named `nodeName` against the cluster `transport` reaches. */
export async function startNodeAgent(options: {
  nodeName: string;
  /** The API server (a @kvt/kube RestClient). */
  transport: RestTransport;
  dataDir: string;
  layout: RuntimeLayout;
  log: Logger;
  /** CPUs the node advertises; default this machine's. */
  cpus?: number;
  /** The pod network its pods join; none: they share the node's network. */
  network?: KubeletNetwork;
  /**
   * The log port's serving certificate and client CA (kubelet `--tls-cert-file`, `--client-ca-file`); default a
   * throw-away CA of its own, so the port is still mutual TLS that no client can pass.
   */
  tls?: LogServerTls;
  /** The kubelet's device plugins directory (its kubelet.sock); default `<dataDir>/device-plugins`. */
  devicePluginsDir?: string;
}): Promise<NodeAgent> {
  const nodes = resourceClient<V1Node>(options.transport, CORE_V1.nodes);
  let statusChanged: () => void = () => undefined;
  const devices = new DeviceManager({
    dir: options.devicePluginsDir ?? join(options.dataDir, "device-plugins"),
    log: options.log.child({ component: "device-manager" }),
    onChange: () => statusChanged(),
  });
  await devices.start();
  const kubelet = new Kubelet({ ...options, devices });
  const logs = await startLogServer((ns, pod, container) => kubelet.containerLogPath(ns, pod, container), {
    tls: options.tls ?? (await throwAwayTls(options.nodeName)),
  });
  const facts: NodeFacts = {
    nodeName: options.nodeName,
    cpus: options.cpus ?? cpus().length,
    memoryBytes: totalmem(),
    kubeletPort: logs.port,
    kernelVersion: release(),
    kubeletVersion: "v1.32.0-kubevirt-ts",
  };
  const readySince = new Date();
  try {
    await nodes.create(nodeObject(facts));
  } catch (err) {
    // The node exists from an earlier run; it keeps its labels and taints, and we take it over.
    if (!isAlreadyExists(err)) throw err;
  }
  const heartbeat = async (): Promise<void> => {
    try {
      const status = nodeStatus(facts, new Date(), readySince, devices.capacity());
      await nodes.mergePatch("", options.nodeName, { status }, "status");
    } catch (err) {
      options.log.warn({ err }, "node heartbeat failed; retrying at the next period");
    }
  };
  await heartbeat();
  const timer = setInterval(() => void heartbeat(), HEARTBEAT_MS);
  // Device capacity reaches the Node within a moment of a plugin's list (several changes, one write).
  let pending: ReturnType<typeof setTimeout> | undefined;
  statusChanged = () => {
    pending ??= setTimeout(() => {
      pending = undefined;
      void heartbeat();
    }, DEVICE_STATUS_DELAY_MS);
  };
  await kubelet.start();
  options.log.info({ node: options.nodeName, kubeletPort: logs.port }, "node ready");
  return {
    nodeName: options.nodeName,
    kubelet,
    async stop() {
      clearInterval(timer);
      clearTimeout(pending);
      await kubelet.stop();
      await devices.stop();
      await logs.close();
    },
  };
}

/** A serving certificate from a CA whose key is dropped: mutual TLS that refuses every client. */
async function throwAwayTls(nodeName: string): Promise<LogServerTls> {
  const ca = await generateCa(`kubelet-${nodeName}-unused-ca`, 1);
  const serving = await issueCertificate(ca, { commonName: `system:node:${nodeName}`, ipAddresses: ["127.0.0.1"] });
  return { cert: serving.certPem, key: serving.keyPem, clientCa: ca.certPem };
}
