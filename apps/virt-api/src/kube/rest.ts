/**
 * The HTTP transport virt-api uses to reach the Kubernetes API server, acting as the requesting user through
 * impersonation headers (`Impersonate-User`, `Impersonate-Group`, `Impersonate-Uid`, `Impersonate-Extra-*`), so
 * every write it makes is authorized for that user, never around them.
 *
 *   virt-api --(TLS, own credentials + Impersonate-*)--> kube-apiserver --(RBAC as the user)--> storage
 */
import { request as httpRequest, type IncomingMessage, type RequestOptions } from "node:http";
import { request as httpsRequest } from "node:https";
import type { KubeAccess } from "@kvt/kube";
import type { Registry } from "@kvt/observability";
import { type RestRequestRecorder, restClientMetrics } from "./rest-metrics.ts";

/** Who a request acts as (AdmissionReview `userInfo`, or the aggregator's X-Remote-* headers). */
export interface UserInfo {
  readonly username: string;
  readonly uid?: string;
  readonly groups: readonly string[];
  readonly extra: Readonly<Record<string, readonly string[]>>;
}

/** virt-api's service account (KubeVirt's `kubevirt-apiserver`): one of those the VMI update webhook trusts. */
export const VIRT_API_SERVICE_ACCOUNT = "kubevirt-apiserver";

/** The user a service account authenticates as (its name and the groups the API server gives every such token). */
export function serviceAccountUser(namespace: string, name: string): UserInfo {
  return {
    username: `system:serviceaccount:${namespace}:${name}`,
    groups: ["system:serviceaccounts", `system:serviceaccounts:${namespace}`, "system:authenticated"],
    extra: {},
  };
}

/** One call to the API server. */
export interface RestRequest {
  readonly method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  /** Absolute API path, e.g. `/apis/kubevirt.io/v1/namespaces/default/virtualmachines/vm1`. */
  readonly path: string;
  readonly query?: Readonly<Record<string, string | undefined>>;
  readonly body?: unknown;
  /** Default `application/json`; patches pass `application/json-patch+json`. */
  readonly contentType?: string;
}

/** The answer: HTTP status and the parsed JSON body (or the raw text when it is not JSON). */
export interface RestResponse {
  readonly status: number;
  readonly body: unknown;
}

/** Sends requests to the API server; `as` adds impersonation. Implemented over HTTP below and by fakes in tests. */
export interface RestTransport {
  send(req: RestRequest, as?: UserInfo): Promise<RestResponse>;
}

/** The impersonation headers for `user` (names as client-go's `ImpersonationConfig` sends them). */
export function impersonationHeaders(user: UserInfo): Record<string, string | string[]> {
  const headers: Record<string, string | string[]> = { "Impersonate-User": user.username };
  if (user.groups.length > 0) headers["Impersonate-Group"] = [...user.groups];
  if (user.uid) headers["Impersonate-Uid"] = user.uid;
  for (const [key, values] of Object.entries(user.extra)) {
    headers[`Impersonate-Extra-${encodeURIComponent(key)}`] = [...values];
  }
  return headers;
}

function buildPath(req: RestRequest): string {
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(req.query ?? {})) if (v !== undefined) params.set(k, v);
  const qs = params.toString();
  return qs ? `${req.path}?${qs}` : req.path;
}

async function readBody(res: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of res) chunks.push(chunk as Buffer);
  const text = Buffer.concat(chunks).toString("utf8");
  if (text.length === 0) return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

/** Options for {@link HttpTransport}. */
export interface HttpTransportOptions {
  /** Credentials and server from a kubeconfig (or in-cluster config) loaded by the composition root. */
  readonly kubeConfig: KubeAccess;
  /** Per-request deadline in milliseconds; default 30 000. */
  readonly timeoutMs?: number;
  /** Registry for the `kubevirt_rest_client_*` metrics; none means no metrics. */
  readonly registry?: Registry;
}

/** {@link RestTransport} over node:http(s), configured from a kubeconfig. */
export class HttpTransport implements RestTransport {
  readonly #kc: KubeAccess;
  readonly #timeoutMs: number;
  readonly #record: RestRequestRecorder | undefined;

  constructor(options: HttpTransportOptions) {
    this.#kc = options.kubeConfig;
    this.#timeoutMs = options.timeoutMs ?? 30_000;
    const server = options.kubeConfig.getCurrentCluster()?.server;
    this.#record = options.registry && server ? restClientMetrics(options.registry, new URL(server).host) : undefined;
  }

  async send(req: RestRequest, as?: UserInfo): Promise<RestResponse> {
    if (!this.#record) return await this.#send(req, as);
    const started = performance.now();
    let code = "<error>";
    try {
      const response = await this.#send(req, as);
      code = String(response.status);
      return response;
    } finally {
      this.#record(req, code, (performance.now() - started) / 1000);
    }
  }

  async #send(req: RestRequest, as?: UserInfo): Promise<RestResponse> {
    const cluster = this.#kc.getCurrentCluster();
    if (!cluster) throw new Error("no current cluster in the kubeconfig");
    const base = new URL(cluster.server);
    const options: RequestOptions & { rejectUnauthorized?: boolean } = {
      method: req.method,
      hostname: base.hostname.replace(/^\[|\]$/g, ""),
      port: base.port || (base.protocol === "https:" ? 443 : 80),
      path: `${base.pathname.replace(/\/$/, "")}${buildPath(req)}`,
      headers: {},
    };
    await this.#kc.applyToHTTPSOptions(options);
    if (base.protocol !== "https:") delete options.agent; // an https.Agent cannot carry plain http
    const headers: Record<string, string | string[]> = {
      ...(options.headers as Record<string, string>),
      Accept: "application/json",
      ...(as ? impersonationHeaders(as) : {}),
    };
    const payload = req.body === undefined ? undefined : JSON.stringify(req.body);
    if (payload !== undefined) headers["Content-Type"] = req.contentType ?? "application/json";
    options.headers = headers;
    const send = base.protocol === "https:" ? httpsRequest : httpRequest;
    return await new Promise<RestResponse>((resolve, reject) => {
      const r = send(options, (res) => {
        readBody(res).then((body) => resolve({ status: res.statusCode ?? 0, body }), reject);
      });
      r.setTimeout(this.#timeoutMs, () =>
        r.destroy(new Error(`request to the API server timed out after ${this.#timeoutMs} ms`)),
      );
      r.on("error", reject);
      r.end(payload);
    });
  }
}
