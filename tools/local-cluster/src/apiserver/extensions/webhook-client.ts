/**
 * One admission webhook call: AdmissionReview v1 POSTed over HTTPS (verified against the webhook's caBundle) with
 * `?timeout=<n>s` and a deadline, the answer checked as kube-apiserver checks it (apiVersion/kind, matching uid,
 * patchType with a patch). Anything that keeps the call from producing a usable answer is a
 * {@link WebhookCallError}; the caller applies the failurePolicy.
 *
 *   AdmissionAttributes --review()--> {"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{...}}
 *        --POST url?timeout=10s (TLS, caBundle)--> webhook --> {"response":{uid, allowed, status?, patchType?, patch?}}
 */
import { randomUUID } from "node:crypto";
import { request as httpRequest, type IncomingMessage } from "node:http";
import { Agent, request as httpsRequest } from "node:https";
import type { AdmissionAttributes } from "../admission/types.ts";
import { isObject, type Json, type JsonObject } from "../types.ts";
import type { Webhook } from "./webhook-rules.ts";

/** The webhook could not be called or answered nonsense (failurePolicy decides). */
export class WebhookCallError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "WebhookCallError";
  }
}

/** The parts of an AdmissionResponse the server acts on. */
export interface AdmissionResponse {
  readonly allowed: boolean;
  /** The denial's Status (message, reason, code, details), if any. */
  readonly status: JsonObject | undefined;
  /** The decoded RFC 6902 patch (mutating webhooks), if any. */
  readonly patch: Json | undefined;
  readonly warnings: readonly string[];
}

const OPTIONS_KIND: Record<string, string> = {
  CREATE: "CreateOptions",
  UPDATE: "UpdateOptions",
  DELETE: "DeleteOptions",
};
/**
 * The largest webhook answer read: a mutating webhook's JSON patch (base64) may replace a whole object of up to the
 * 3 MiB request limit, so 3 MiB was too little (found by the API fuzz lane: a 2 MB VM apply failed the call).
 */
const MAX_RESPONSE_BYTES = 16 * 1024 * 1024;
const agents = new Map<string, Agent>();

/**
 * A keep-alive agent per trust bundle: webhooks sit on every write of their resources (VMI updates included), so
 * a TLS handshake per call would be the dominant cost. Bounded: configurations rarely carry more than a few CAs.
 */
function agentFor(caPem: string | undefined): Agent {
  const key = caPem ?? "";
  let agent = agents.get(key);
  if (!agent) {
    if (agents.size >= 32) {
      for (const a of agents.values()) a.destroy();
      agents.clear();
    }
    agent = new Agent({ keepAlive: true, maxSockets: 16, ...(caPem ? { ca: caPem } : {}) });
    agents.set(key, agent);
  }
  return agent;
}

/** The AdmissionReview v1 request for `attrs` (a new uid each call). */
export function admissionReview(attrs: AdmissionAttributes, uid: string = randomUUID()): JsonObject {
  const kind = attrs.objectKind ?? { group: attrs.group, version: attrs.version, kind: attrs.kind };
  const resource = { group: attrs.group, version: attrs.version, resource: attrs.resource };
  const requestVersion = attrs.requestVersion ?? attrs.version;
  const optionsKind = OPTIONS_KIND[attrs.operation];
  const request: JsonObject = {
    uid,
    kind,
    resource,
    requestKind: attrs.objectKind ? { ...kind } : { ...kind, version: requestVersion },
    requestResource: { ...resource, version: requestVersion },
    name: attrs.name,
    operation: attrs.operation,
    userInfo: { username: attrs.userInfo.username, groups: [...attrs.userInfo.groups] },
    object: (attrs.object ?? null) as unknown as Json,
    oldObject: (attrs.oldObject ?? null) as unknown as Json,
    dryRun: attrs.dryRun,
    options: optionsKind ? { ...(attrs.options as JsonObject), apiVersion: "meta.k8s.io/v1", kind: optionsKind } : null,
  };
  if (attrs.subResource) {
    request.subResource = attrs.subResource;
    request.requestSubResource = attrs.subResource;
  }
  if (attrs.namespace) request.namespace = attrs.namespace;
  return { apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", request };
}

/**
 * Posts `body` to `hook`. A kept-alive connection the webhook server closed while idle fails the first write or
 * read with ECONNRESET: that attempt is made again once on a fresh connection, as Go's HTTP transport does for a
 * request on a reused connection that got no answer (found by the API fuzz lane: a 1.8 MB review after an idle spell).
 */
async function post(hook: Webhook, body: string): Promise<{ code: number; text: string }> {
  try {
    return await postOnce(hook, body);
  } catch (err) {
    if (!(err instanceof StaleConnectionError)) throw err;
    return await postOnce(hook, body);
  }
}

/** The connection was reused and reset before any answer came back. */
class StaleConnectionError extends WebhookCallError {}

function postOnce(hook: Webhook, body: string): Promise<{ code: number; text: string }> {
  return new Promise((resolve, reject) => {
    let url: URL;
    try {
      url = new URL(hook.url);
    } catch (err) {
      reject(new WebhookCallError(`failed to call webhook: invalid URL "${hook.url}"`, { cause: err }));
      return;
    }
    url.searchParams.set("timeout", `${hook.timeoutSeconds}s`);
    const target = url.toString();
    const fail = (why: string, cause?: unknown): void =>
      reject(new WebhookCallError(`failed to call webhook: Post "${target}": ${why}`, { cause }));
    if (url.protocol !== "https:" && url.protocol !== "http:")
      return fail(`unsupported protocol scheme "${url.protocol}"`);
    const options = {
      method: "POST",
      headers: {
        "content-type": "application/json",
        accept: "application/json",
        "content-length": Buffer.byteLength(body),
      },
      ...(url.protocol === "https:" ? { agent: agentFor(hook.caPem) } : {}),
      ...(url.protocol === "https:" && hook.serverName ? { servername: hook.serverName } : {}),
    };
    let answered = false;
    const onAnswer = (res: IncomingMessage): void => {
      answered = true;
      const chunks: Buffer[] = [];
      let size = 0;
      res.on("data", (c: Buffer) => {
        size += c.length;
        if (size > MAX_RESPONSE_BYTES) {
          // Failed with this reason first: destroying the request makes the response report a bare ECONNRESET.
          fail(`response body over ${MAX_RESPONSE_BYTES} bytes`);
          req.destroy();
          return;
        }
        chunks.push(c);
      });
      res.on("end", () => resolve({ code: res.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") }));
      res.on("error", (err) => fail(err.message, err));
    };
    const req = url.protocol === "https:" ? httpsRequest(url, options, onAnswer) : httpRequest(url, options, onAnswer);
    req.setTimeout(hook.timeoutSeconds * 1000, () => req.destroy(new Error("context deadline exceeded")));
    req.on("error", (err: NodeJS.ErrnoException) => {
      if (req.reusedSocket && err.code === "ECONNRESET" && !answered)
        reject(new StaleConnectionError(`failed to call webhook: ${err.message}`, { cause: err }));
      else fail(err.message, err);
    });
    req.end(body);
  });
}

function decodePatch(resp: JsonObject): Json | undefined {
  if (resp.patch === undefined || resp.patch === null || resp.patch === "") return undefined;
  if (resp.patchType !== "JSONPatch")
    throw new WebhookCallError(`unsupported patch type ${JSON.stringify(resp.patchType ?? "")}`);
  if (typeof resp.patch !== "string") throw new WebhookCallError("patch is not a base64 string");
  try {
    return JSON.parse(Buffer.from(resp.patch, "base64").toString("utf8")) as Json;
  } catch (err) {
    throw new WebhookCallError(`the patch is not valid JSON: ${(err as Error).message}`, { cause: err });
  }
}

/** Calls `hook` for `attrs`; throws {@link WebhookCallError} when no valid answer came back. */
export async function callWebhook(hook: Webhook, attrs: AdmissionAttributes): Promise<AdmissionResponse> {
  if (!hook.url) throw new WebhookCallError("failed to call webhook: clientConfig names neither a url nor a service");
  const uid = randomUUID();
  const { code, text } = await post(hook, JSON.stringify(admissionReview(attrs, uid)));
  if (code < 200 || code >= 300)
    throw new WebhookCallError(`the server responded with status ${code}: ${text.slice(0, 512)}`);
  let review: Json;
  try {
    review = JSON.parse(text) as Json;
  } catch (err) {
    throw new WebhookCallError(`received invalid webhook response: ${(err as Error).message}`, { cause: err });
  }
  if (!isObject(review) || review.kind !== "AdmissionReview" || review.apiVersion !== "admission.k8s.io/v1")
    throw new WebhookCallError('received invalid webhook response: expected an admission.k8s.io/v1 "AdmissionReview"');
  const resp = review.response;
  if (!isObject(resp)) throw new WebhookCallError("webhook response was absent");
  if (resp.uid !== uid)
    throw new WebhookCallError(`expected response.uid="${uid}", got "${typeof resp.uid === "string" ? resp.uid : ""}"`);
  if (typeof resp.allowed !== "boolean") throw new WebhookCallError("webhook response has no allowed field");
  return {
    allowed: resp.allowed,
    status: isObject(resp.status) ? resp.status : undefined,
    patch: resp.allowed ? decodePatch(resp) : undefined,
    warnings: Array.isArray(resp.warnings) ? resp.warnings.filter((w): w is string => typeof w === "string") : [],
  };
}
