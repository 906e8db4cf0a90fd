/**
 * `GET pods/NAME/log` through the node's kubelet, as kube-apiserver does (pod strategy `LogLocation`):
 *
 *   pod -> container (the only one, or `?container=`; several and none named is a 400 listing them)
 *       -> spec.nodeName (none yet: an empty log)
 *       -> Node status.addresses InternalIP + status.daemonEndpoints.kubeletEndpoint.Port
 *       -> GET https://IP:PORT/containerLogs/NS/POD/CONTAINER?follow=&previous=&timestamps=&sinceSeconds=&tailLines=&limitBytes=
 *          with the API server's kubelet client certificate (kube-apiserver `--kubelet-client-certificate`), the
 *          kubelet's serving certificate verified against `--kubelet-certificate-authority` when given
 *       -> streamed to the client (follow: until either side goes away), `limitBytes` enforced here too
 *
 * A kubelet error answer becomes the Status kube-apiserver's generic response checker makes of it
 * (`the server could not find the requested resource ( pods/log NAME)` for a 404, the kubelet's text as the cause).
 */
import type { IncomingMessage } from "node:http";
import { request as httpsRequest } from "node:https";
import { type ApiError, badRequest, internal, notFound, statusError } from "../errors.ts";
import type { SubresourceContext, SubresourceHandler } from "../http/resource-handler.ts";
import { isObject, type KubeObject } from "../types.ts";

/** The API server's credentials towards kubelets (kube-apiserver's `--kubelet-client-*` flags). */
export interface KubeletClientTls {
  /** Client certificate and key (PEM), signed by the kubelets' `--client-ca-file`. */
  readonly certPem: string;
  readonly keyPem: string;
  /** CA of the kubelets' serving certificates; unset: not verified (kube-apiserver's default). */
  readonly caPem?: string;
}

const PASSED_ON = ["follow", "previous", "timestamps", "sinceSeconds", "sinceTime", "tailLines", "limitBytes"];

function names(list: unknown): string[] {
  return Array.isArray(list) ? list.filter(isObject).map((c) => (typeof c.name === "string" ? c.name : "")) : [];
}

/** The container to read (kube-apiserver `ValidateContainer`). */
export function containerFor(pod: KubeObject, requested: string | null): string {
  const spec = isObject(pod.spec) ? pod.spec : {};
  const containers = names(spec.containers);
  const name = pod.metadata.name ?? "";
  if (!requested) {
    const only = containers.length === 1 ? containers[0] : undefined;
    if (only !== undefined) return only;
    if (containers.length === 0) throw badRequest(`a container name must be specified for pod ${name}`);
    throw badRequest(`a container name must be specified for pod ${name}, choose one of: [${containers.join(" ")}]`);
  }
  const all = [...containers, ...names(spec.initContainers), ...names(spec.ephemeralContainers)];
  if (!all.includes(requested)) throw badRequest(`container ${requested} is not valid for pod ${name}`);
  return requested;
}

/** Where the node's kubelet listens (InternalIP, else Hostname, and the kubelet endpoint port). */
export function kubeletAddress(node: KubeObject): { host: string; port: number } | undefined {
  const status = isObject(node.status) ? node.status : {};
  const addrs = Array.isArray(status.addresses) ? status.addresses.filter(isObject) : [];
  const pick = (t: string): string | undefined =>
    addrs.find((a) => a.type === t && typeof a.address === "string")?.address as string | undefined;
  const host = pick("InternalIP") ?? pick("ExternalIP") ?? pick("Hostname");
  const ep =
    isObject(status.daemonEndpoints) && isObject(status.daemonEndpoints.kubeletEndpoint)
      ? status.daemonEndpoints.kubeletEndpoint
      : {};
  const port = typeof ep.Port === "number" ? ep.Port : 0;
  if (!host || port <= 0) return undefined;
  return { host, port };
}

function checkInt(q: URLSearchParams, key: string, pod: string, min: number): void {
  const v = q.get(key);
  if (v === null) return;
  if (!/^-?\d+$/.test(v)) throw badRequest(`invalid value for ${key}: "${v}"`);
  if (Number(v) < min)
    throw statusError(
      422,
      "Invalid",
      `PodLogOptions "${pod}" is invalid: ${key}: Invalid value: ${v}: must be greater than ${min === 0 ? "or equal to 0" : "0"}`,
    );
}

function kubeletError(res: IncomingMessage, name: string, body: string): ApiError {
  const code = res.statusCode ?? 500;
  const [reason, message] =
    code === 404
      ? ["NotFound", "the server could not find the requested resource"]
      : code === 400
        ? ["BadRequest", "the server rejected our request for an unknown reason"]
        : code === 403
          ? ["Forbidden", "the server does not allow access to the requested resource"]
          : ["InternalError", "an error on the server has prevented the request from succeeding"];
  return statusError(code, reason, `${message} ( pods/log ${name})`, {
    name,
    kind: "pods/log",
    causes: [{ reason: "UnexpectedServerResponse", message: body.trim() }],
  });
}

/** Streams `res` to the client, ending after `limit` bytes when given. */
function pipeLimited(from: IncomingMessage, c: SubresourceContext, limit: number | undefined): Promise<void> {
  return new Promise((resolve) => {
    let sent = 0;
    c.res.writeHead(200, {
      "Content-Type": "text/plain",
      "Cache-Control": "no-cache, private",
      "Transfer-Encoding": "chunked",
    });
    c.res.flushHeaders();
    const done = (): void => {
      from.destroy();
      if (!c.res.writableEnded) c.res.end();
      resolve();
    };
    from.on("data", (chunk: Buffer) => {
      const part = limit === undefined ? chunk : chunk.subarray(0, Math.max(0, limit - sent));
      sent += part.length;
      if (part.length > 0) c.res.write(part);
      if (limit !== undefined && sent >= limit) done();
    });
    from.on("end", done);
    from.on("error", done);
    c.res.on("close", done);
  });
}

/** The `core/pods/log` subresource handler, reaching kubelets with `client` (without it kubelets refuse). */
export function podLogsHandler(client?: KubeletClientTls): SubresourceHandler {
  return (c) => podLogs(c, client);
}

async function podLogs(c: SubresourceContext, client: KubeletClientTls | undefined): Promise<void> {
  if (c.req.method !== "GET") throw statusError(405, "MethodNotAllowed", "only GET is supported on pods/log");
  const name = c.info.name as string;
  const pod = c.svc.get(c.def, c.info.namespace, name).obj;
  const container = containerFor(pod, c.query.get("container"));
  for (const k of ["tailLines", "sinceSeconds", "limitBytes"]) checkInt(c.query, k, name, k === "tailLines" ? 0 : 1);
  const nodeName = (pod.spec as { nodeName?: string } | undefined)?.nodeName;
  if (!nodeName) {
    c.res.writeHead(200, { "Content-Type": "text/plain" });
    c.res.end();
    return;
  }
  const nodeDef = c.svc.registry.lookup("", "v1", "nodes");
  const node = nodeDef ? c.svc.store.get("core/nodes", nodeName)?.obj : undefined;
  if (!node) throw notFound({ group: "", resource: "nodes" }, nodeName);
  const at = kubeletAddress(node);
  if (!at) throw internal(new Error(`node ${nodeName} reports no kubelet endpoint`));
  const params = new URLSearchParams();
  for (const k of PASSED_ON) {
    const v = c.query.get(k);
    if (v !== null && v !== "false") params.set(k, v);
  }
  const path = `/containerLogs/${encodeURIComponent(pod.metadata.namespace ?? "")}/${encodeURIComponent(name)}/${encodeURIComponent(container)}`;
  const query = params.toString();
  const limit = c.query.get("limitBytes") === null ? undefined : Number(c.query.get("limitBytes"));
  const upstream = await new Promise<IncomingMessage>((resolve, reject) => {
    const req = httpsRequest(
      {
        host: at.host,
        port: at.port,
        path: query ? `${path}?${query}` : path,
        method: "GET",
        ...(client ? { cert: client.certPem, key: client.keyPem } : {}),
        ...(client?.caPem ? { ca: client.caPem } : { rejectUnauthorized: false }),
      },
      resolve,
    );
    req.setTimeout(30_000, () => req.destroy(new Error("the kubelet did not answer in time")));
    req.on("error", (err) => reject(internal(new Error(`Get "https://${at.host}:${at.port}${path}": ${err.message}`))));
    c.res.on("close", () => req.destroy());
    req.end();
  });
  upstream.socket.setTimeout(0);
  if ((upstream.statusCode ?? 500) !== 200) {
    const chunks: Buffer[] = [];
    for await (const chunk of upstream) chunks.push(chunk as Buffer);
    throw kubeletError(upstream, name, Buffer.concat(chunks).toString("utf8").slice(0, 4096));
  }
  await pipeLimited(upstream, c, limit);
}
