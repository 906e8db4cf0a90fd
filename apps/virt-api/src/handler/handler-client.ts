/**
 * How virt-api reaches the virt-handler that runs a VMI. This is the contract virt-handler serves (the same URL
 * scheme as KubeVirt's `VirtHandlerConn`), over HTTPS on port 8186 of the handler on the VMI's node:
 *
 *   PUT  /v1/namespaces/{ns}/virtualmachineinstances/{name}/pause        body: PauseOptions JSON  -> 2xx | Status
 *   PUT  /v1/namespaces/{ns}/virtualmachineinstances/{name}/unpause      body: UnpauseOptions     -> 2xx | Status
 *   PUT  /v1/namespaces/{ns}/virtualmachineinstances/{name}/softreboot   no body                  -> 2xx | Status
 *   GET  /v1/namespaces/{ns}/virtualmachineinstances/{name}/guestosinfo  -> VirtualMachineInstanceGuestOSInfo JSON
 *   GET  /v1/namespaces/{ns}/virtualmachineinstances/{name}/console      WebSocket upgrade, subprotocol
 *        `plain.kubevirt.io`: binary frames carry the serial port's raw bytes both ways; either side closing
 *        ends the session.
 *   GET  /v1/namespaces/{ns}/virtualmachineinstances/{name}/portforward/{port}/{protocol}   WebSocket upgrade,
 *        `plain.kubevirt.io`, answered once the launcher has connected to the guest's port (else a Status saying
 *        why); binary frames carry the connection's bytes both ways.
 *
 * virt-api presents its client certificate for the handlers (KubeVirt's `kubevirt-virt-handler-certs`, CN
 * `kubevirt.io:system:client:virt-handler`; the handler accepts nothing else); the handler's serving certificate is
 * verified against the KubeVirt CA and, since one certificate serves every node's pod IP, by its CN
 * (`kubevirt.io:system:node:virt-handler`) rather than its address, as KubeVirt does. Plain HTTP is refused.
 * The handler for a node is found by a {@link HandlerLocator}.
 */
import type { RequestOptions } from "node:http";
import { request as httpsRequest } from "node:https";
import type { PeerCertificate } from "node:tls";
import type { VirtualMachineInstance } from "@kvt/api";
import { answerMessage } from "@kvt/kube";
import WebSocket, { type ClientOptions } from "ws";
import type { ClusterClient } from "../kube/cluster-client.ts";

/** KubeVirt's virt-handler console/lifecycle port. */
export const HANDLER_PORT = 8186;
/** The console WebSocket subprotocol. */
export const CONSOLE_SUBPROTOCOL = "plain.kubevirt.io";
/** The CN of virt-handler's serving certificate (KubeVirt's `kubevirt-virt-handler-server-certs`). */
export const HANDLER_SERVER_NAME = "kubevirt.io:system:node:virt-handler";

/** Finds the base URL (`https://host:port`) of the virt-handler serving a VMI's node. */
export interface HandlerLocator {
  locate(vmi: VirtualMachineInstance): Promise<string>;
}

/** KubeVirt's way: the `kubevirt.io=virt-handler` pod on `vmi.status.nodeName`, at its pod IP, port 8186. */
export class PodHandlerLocator implements HandlerLocator {
  readonly #client: ClusterClient;
  readonly #namespace: string;
  readonly #port: number;

  constructor(client: ClusterClient, namespace: string, port = HANDLER_PORT) {
    this.#client = client;
    this.#namespace = namespace;
    this.#port = port;
  }

  async locate(vmi: VirtualMachineInstance): Promise<string> {
    const node = vmi.status?.nodeName;
    if (!node) throw new Error(`VMI ${vmi.metadata?.name ?? ""} is not scheduled to a node`);
    const pods = await this.#client.listPods(this.#namespace, "kubevirt.io=virt-handler", `spec.nodeName=${node}`);
    const pod = pods.find((p) => p.status?.phase === "Running" && p.status.podIP) ?? pods.find((p) => p.status?.podIP);
    if (!pod?.status?.podIP) throw new Error(`no virt-handler pod with an IP found on node ${node}`);
    const ip = pod.status.podIP.includes(":") ? `[${pod.status.podIP}]` : pod.status.podIP;
    return `https://${ip}:${this.#port}`;
  }
}

/**
 * A fixed mapping, for the local cluster and tests. `spec` is either a template with `{node}` replaced by the
 * VMI's node name (`https://{node}.handlers:8186`), or a list `node1=URL,node2=URL`.
 */
export class TemplateHandlerLocator implements HandlerLocator {
  readonly #template: string | undefined;
  readonly #byNode = new Map<string, string>();
  constructor(spec: string) {
    const entries = spec
      .split(",")
      .map((e) => e.trim())
      .filter((e) => e.length > 0);
    if (entries.length > 0 && entries.every((e) => /^[^=/:]+=\S+$/.test(e))) {
      for (const e of entries) {
        const at = e.indexOf("=");
        this.#byNode.set(e.slice(0, at), e.slice(at + 1));
      }
      this.#template = undefined;
    } else this.#template = spec;
  }
  locate(vmi: VirtualMachineInstance): Promise<string> {
    const node = vmi.status?.nodeName;
    if (!node) return Promise.reject(new Error(`VMI ${vmi.metadata?.name ?? ""} is not scheduled to a node`));
    if (this.#template !== undefined) return Promise.resolve(this.#template.replaceAll("{node}", node));
    const url = this.#byNode.get(node);
    return url ? Promise.resolve(url) : Promise.reject(new Error(`no virt-handler known for node ${node}`));
  }
}

/** TLS material for talking to virt-handler. */
export interface HandlerTls {
  /** CA that signed the handlers' serving certificates. */
  readonly ca?: string;
  /** virt-api's client certificate and key. */
  readonly cert?: string;
  readonly key?: string;
  /**
   * The CN the handler's certificate must carry, checked instead of the host name (one certificate serves every
   * node's pod IP); unset: the usual host-name check.
   */
  readonly serverName?: string;
}

/** Node TLS options for `tls`: the CA, the client certificate, and the server identity check. */
function tlsOptions(tls: HandlerTls): Pick<RequestOptions & HandlerTls, "ca" | "cert" | "key"> & {
  checkServerIdentity?: (host: string, cert: PeerCertificate) => Error | undefined;
} {
  const { serverName, ...material } = tls;
  if (!serverName) return material;
  return {
    ...material,
    checkServerIdentity: (_host, cert) =>
      cert.subject?.CN === serverName
        ? undefined
        : new Error(`virt-handler's certificate is for "${String(cert.subject?.CN)}", not "${serverName}"`),
  };
}

function requireHttps(base: URL): void {
  if (base.protocol !== "https:") {
    throw new Error(`virt-handler is reached over mutual TLS only, not ${base.protocol}//${base.host}`);
  }
}

/** The calls virt-api makes on a handler. Fakes implement it in unit tests. */
export interface HandlerClient {
  /** PUT `sub` for the VMI; rejects with the handler's message on a non-2xx answer. */
  put(vmi: VirtualMachineInstance, sub: string, body?: unknown): Promise<void>;
  /** GET `sub` for the VMI and parse the JSON answer. */
  get(vmi: VirtualMachineInstance, sub: string): Promise<unknown>;
  /** Opens the console WebSocket to the handler, paused: call `resume()` once listeners are attached. */
  console(vmi: VirtualMachineInstance): Promise<WebSocket>;
  /**
   * Opens a WebSocket to the guest's `port` through the handler and the VMI's launcher, paused as the console's.
   * Rejects with the handler's Status message (e.g. `dial tcp 10.0.2.2:23: connect: connection refused`).
   */
  portForward(vmi: VirtualMachineInstance, port: number, protocol: string): Promise<WebSocket>;
}

function vmiPath(vmi: VirtualMachineInstance, sub: string): string {
  return `/v1/namespaces/${vmi.metadata?.namespace ?? ""}/virtualmachineinstances/${vmi.metadata?.name ?? ""}/${sub}`;
}

/** {@link HandlerClient} over mutual TLS (a locator's `http://` URL is refused). */
export class HttpHandlerClient implements HandlerClient {
  readonly #locator: HandlerLocator;
  #tls: HandlerTls;
  readonly #timeoutMs: number;

  constructor(locator: HandlerLocator, tls: HandlerTls = {}, timeoutMs = 20_000) {
    this.#locator = locator;
    this.#tls = tls;
    this.#timeoutMs = timeoutMs;
  }

  async #call(vmi: VirtualMachineInstance, method: "GET" | "PUT", sub: string, body?: unknown): Promise<string> {
    const base = new URL(await this.#locator.locate(vmi));
    requireHttps(base);
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const options: RequestOptions & HandlerTls = {
      method,
      hostname: base.hostname.replace(/^\[|\]$/g, ""),
      port: base.port,
      path: vmiPath(vmi, sub),
      headers: payload ? { "Content-Type": "application/json" } : {},
      ...tlsOptions(this.#tls),
    };
    return await new Promise<string>((resolve, reject) => {
      const req = httpsRequest(options, (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          const code = res.statusCode ?? 0;
          if (code >= 200 && code < 300) return resolve(text);
          reject(new Error(answerMessage(text) || `virt-handler answered HTTP ${code}`));
        });
        res.on("error", reject);
      });
      req.setTimeout(this.#timeoutMs, () => req.destroy(new Error("virt-handler did not answer in time")));
      req.on("error", reject);
      req.end(payload);
    });
  }

  /** Replaces the CA and client certificate (a rotated Secret); later calls use them. */
  updateTls(tls: HandlerTls): void {
    this.#tls = tls;
  }

  async put(vmi: VirtualMachineInstance, sub: string, body?: unknown): Promise<void> {
    await this.#call(vmi, "PUT", sub, body);
  }

  async get(vmi: VirtualMachineInstance, sub: string): Promise<unknown> {
    return JSON.parse(await this.#call(vmi, "GET", sub)) as unknown;
  }

  async console(vmi: VirtualMachineInstance): Promise<WebSocket> {
    return this.#websocket(vmi, "console", (code) => `virt-handler refused the console: HTTP ${code}`);
  }

  async portForward(vmi: VirtualMachineInstance, port: number, protocol: string): Promise<WebSocket> {
    return this.#websocket(
      vmi,
      `portforward/${port}/${encodeURIComponent(protocol)}`,
      (code, message) => message || `virt-handler refused the port-forward: HTTP ${code}`,
    );
  }

  /** Opens the WebSocket `sub` of the VMI; a refusal rejects with `refused(status, Status message)`. */
  async #websocket(
    vmi: VirtualMachineInstance,
    sub: string,
    refused: (code: number, message: string) => string,
  ): Promise<WebSocket> {
    const base = new URL(await this.#locator.locate(vmi));
    requireHttps(base);
    const url = `wss://${base.host}${vmiPath(vmi, sub)}`;
    // ws hands these options to tls.connect, whose checkServerIdentity returns an Error (ws's typing says boolean).
    const tlsConnect = tlsOptions(this.#tls) as ClientOptions;
    const ws = new WebSocket(url, [CONSOLE_SUBPROTOCOL], { ...tlsConnect, handshakeTimeout: this.#timeoutMs });
    return await new Promise<WebSocket>((resolve, reject) => {
      // Paused until the proxy has attached its listeners, so no early frame is lost.
      ws.once("open", () => {
        ws.pause();
        resolve(ws);
      });
      ws.once("unexpected-response", (_req, res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("error", () => reject(new Error(refused(res.statusCode ?? 0, ""))));
        res.on("end", () => {
          reject(new Error(refused(res.statusCode ?? 0, answerMessage(Buffer.concat(chunks).toString("utf8")))));
          ws.terminate();
        });
      });
      ws.once("error", reject);
    });
  }
}
