/**
 * The API fuzz lane's driver: throws generated and mutated requests at a running API server (core kinds and the
 * KubeVirt CRDs, through virt-api's webhooks) and at virt-api directly (its webhooks and subresources), and
 * reports every answer that breaks the contract: a 5xx, or a request that never gets an answer.
 *
 *   for i in 0.. until the time budget:  rng = Rng(seed, i)  (iteration i is reproducible from (seed, i) alone)
 *     pick a target kind and an action:
 *       create   POST   a mutated seed object | a schema-generated one (/openapi/v3) | raw bytes
 *       update   PUT    a mutated copy of a stored object (its resourceVersion kept or broken)
 *       patch    PATCH  merge / JSON / strategic / apply patches of random content
 *       webhook  POST   an AdmissionReview carrying a mutated object, straight to virt-api
 *       action   PUT    start/stop/restart/migrate, expand-vm-spec bodies, through aggregation
 *     answer >= 500, a reset or a timeout  ->  a Failure {seed, iteration, request, answer}
 *
 * What the server stored is checked afterwards by the caller (api-fuzz.test.ts): every object lists, reads back and
 * decodes strictly.
 */
import { request as httpsRequest } from "node:https";
import type { Json, Rng, Schema } from "./generate.ts";
import { anyValue, asObject, fromSchema, mutate, rawBody, Rng as SeededRng } from "./generate.ts";

/** Where to send requests: the API server (admin token) and virt-api (webhooks, no client certificate). */
export interface FuzzEndpoints {
  readonly api: { readonly url: string; readonly ca: string | undefined; readonly token: string };
  readonly virtApi: { readonly url: string; readonly ca: string };
}

/** One kind under fuzz. */
export interface FuzzTarget {
  /** Collection path, e.g. /apis/kubevirt.io/v1/namespaces/fuzz/virtualmachines. */
  readonly path: string;
  readonly kind: string;
  /** A valid object (the metadata name is replaced per request). */
  readonly seed: Json;
  /** Its OpenAPI v3 schema and the document's components (set by the caller from /openapi/v3). */
  schema?: Schema;
  components?: Readonly<Record<string, Schema>>;
  /** virt-api webhook paths that admit this kind (direct AdmissionReviews). */
  readonly webhooks?: readonly string[];
  /** Supports strategic merge patch (built-in kinds). */
  readonly builtin?: boolean;
}

/** One request and what made it a failure. */
export interface FuzzFailure {
  readonly seed: number;
  readonly iteration: number;
  readonly method: string;
  readonly url: string;
  readonly contentType: string;
  /** The body, as sent (base64 when it is not UTF-8 text). */
  readonly body: string;
  readonly status: number | "error" | "timeout";
  readonly answer: string;
}

/** What a run did. */
export interface FuzzReport {
  readonly seed: number;
  readonly iterations: number;
  readonly byStatus: Record<string, number>;
  readonly failures: FuzzFailure[];
}

interface Req {
  readonly method: string;
  readonly url: string;
  readonly contentType: string;
  readonly body: Buffer;
  readonly to: "api" | "virtApi";
}

/** Names every create uses (so updates, patches and subresources find objects), plus fresh ones. */
export const FUZZ_NAMES = ["fuzz-a", "fuzz-b", "fuzz-c"] as const;

/**
 * 5xx answers KubeVirt itself gives, kept for parity (ARCHITECTURE: messages and codes as KubeVirt's): counted apart,
 * not failures. Each names where KubeVirt does it.
 */
export const KUBEVIRT_5XX: readonly { readonly url: RegExp; readonly message: string; readonly where: string }[] = [
  {
    url: /\/virtualmachines\/[^/]+\/(start|stop|restart)$/,
    message: "unable to complete request: stop/start already underway",
    where: "pkg/virt-api/rest/lifecycle.go getChangeRequestJson, written as errors.NewInternalError",
  },
];

/**
 * Sends one request; the answer's status and (truncated) text, or "error"/"timeout". A kept-alive connection the
 * server closed while idle (ECONNRESET before any answer) is tried once more on a new one, as Go's transport does.
 */
export async function send(ep: FuzzEndpoints, r: Req, timeoutMs = 15_000): Promise<Answer> {
  const first = await sendOnce(ep, r, timeoutMs);
  return first.stale ? await sendOnce(ep, r, timeoutMs) : first;
}

interface Answer {
  readonly status: number | "error" | "timeout";
  readonly text: string;
  /** Reset on a reused connection before any answer. */
  readonly stale?: boolean;
}

async function sendOnce(ep: FuzzEndpoints, r: Req, timeoutMs: number): Promise<Answer> {
  const base = r.to === "api" ? ep.api : ep.virtApi;
  const headers: Record<string, string> = { "content-type": r.contentType, accept: "application/json" };
  if (r.to === "api") headers.authorization = `Bearer ${ep.api.token}`;
  return await new Promise((resolve) => {
    const req = httpsRequest(new URL(r.url, base.url), { method: r.method, ca: base.ca, headers }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on("data", (c: Buffer) => {
        if (size < 4096) chunks.push(c);
        size += c.length;
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") }));
      res.on("error", (e) => resolve({ status: "error", text: e.message }));
    });
    req.setTimeout(timeoutMs, () => {
      req.destroy();
      resolve({ status: "timeout", text: `no answer in ${timeoutMs} ms` });
    });
    // The server may answer (413, 415) and close before the whole body is sent: that is an answer, not an error.
    req.on("error", (e: NodeJS.ErrnoException) => {
      if (e.code === "EPIPE") resolve({ status: 0, text: "EPIPE" });
      else if (e.code === "ECONNRESET" && req.reusedSocket) resolve({ status: "error", text: e.message, stale: true });
      else resolve({ status: "error", text: e.message });
    });
    req.end(r.body);
  });
}

const json = (v: unknown): Buffer => Buffer.from(JSON.stringify(v));

function named(seed: Json, name: string): Json {
  const o = asObject(structuredClone(seed));
  o.metadata = { ...asObject(o.metadata ?? null), name };
  return o;
}

function objectBody(rng: Rng, t: FuzzTarget, name: string): Buffer {
  const way = rng.int(10);
  if (way < 5) return json(mutate(rng, named(t.seed, name)));
  if (way < 8 && t.schema) {
    const generated = fromSchema(rng, t.schema, t.components ?? {});
    if (rng.chance(0.1)) return json(generated);
    const o = asObject(generated);
    if (rng.chance(0.8)) {
      const seed = t.seed as Record<string, Json>;
      o.apiVersion = seed.apiVersion ?? null;
      o.kind = seed.kind ?? null;
      o.metadata = { name };
    }
    return json(o);
  }
  return rawBody(rng, named(t.seed, name));
}

const PATCH_TYPES = [
  "application/merge-patch+json",
  "application/json-patch+json",
  "application/strategic-merge-patch+json",
  "application/apply-patch+yaml",
] as const;

function patchBody(rng: Rng, t: FuzzTarget, type: string, name: string): Buffer {
  if (type === "application/json-patch+json") {
    const ops = Array.from({ length: 1 + rng.int(3) }, () => ({
      op: rng.pick(["add", "remove", "replace", "move", "copy", "test", "bogus"]),
      path: rng.pick(["/spec", "/spec/template/spec/domain", "/metadata/labels/a", "/data/x", "/a/b/c", "", "/-", "~"]),
      ...(rng.chance(0.5) ? { from: rng.pick(["/spec", "/metadata", "/nope"]) } : {}),
      value: anyValue(rng, 2),
    }));
    return rng.chance(0.9) ? json(ops) : json(anyValue(rng));
  }
  if (type === "application/apply-patch+yaml" && rng.chance(0.7)) return json(mutate(rng, named(t.seed, name)));
  return rng.chance(0.8)
    ? json(mutate(rng, { spec: anyValue(rng, 2), metadata: { labels: anyValue(rng, 1) } }))
    : rawBody(rng, {});
}

function query(rng: Rng): string {
  const parts: string[] = [];
  if (rng.chance(0.2)) parts.push("dryRun=All");
  if (rng.chance(0.3)) parts.push(`fieldValidation=${rng.pick(["Strict", "Warn", "Ignore", "Bogus"])}`);
  if (rng.chance(0.1)) parts.push(`fieldManager=${rng.pick(["fuzz", "", "x".repeat(200)])}`);
  return parts.length ? `?${parts.join("&")}` : "";
}

/** Builds iteration `i`'s request (pure: from the rng, the targets and `stored`, the current objects by path). */
export function buildRequest(rng: Rng, targets: readonly FuzzTarget[], stored: ReadonlyMap<string, Json>): Req {
  const t = rng.pick(targets);
  const name = rng.chance(0.8) ? rng.pick(FUZZ_NAMES) : `fuzz-${rng.int(1000)}`;
  const item = `${t.path}/${name}`;
  const action = rng.int(20);
  if (action < 7) {
    const contentType = rng.chance(0.9) ? "application/json" : rng.pick(["application/yaml", "text/plain", ""]);
    return { method: "POST", url: `${t.path}${query(rng)}`, contentType, body: objectBody(rng, t, name), to: "api" };
  }
  if (action < 11) {
    const current = stored.get(item) ?? named(t.seed, name);
    const body = rng.chance(0.7) ? json(mutate(rng, current)) : objectBody(rng, t, name);
    return { method: "PUT", url: `${item}${query(rng)}`, contentType: "application/json", body, to: "api" };
  }
  if (action < 15) {
    const types = t.builtin ? PATCH_TYPES : PATCH_TYPES.filter((p) => !p.includes("strategic"));
    const type = rng.pick(types);
    const q = type.includes("apply") ? "?fieldManager=fuzz&force=true" : query(rng);
    return { method: "PATCH", url: `${item}${q}`, contentType: type, body: patchBody(rng, t, type, name), to: "api" };
  }
  if (action < 18 && t.webhooks?.length) return webhookRequest(rng, t, name, stored.get(item));
  return subresourceRequest(rng, name);
}

function webhookRequest(rng: Rng, t: FuzzTarget, name: string, old: Json | undefined): Req {
  const apiVersion = (t.seed as { apiVersion?: string }).apiVersion ?? "";
  const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : ["", apiVersion];
  const operation = rng.pick(["CREATE", "UPDATE", "DELETE", "CONNECT", "BOGUS"]);
  const object = rng.chance(0.8) ? mutate(rng, named(t.seed, name)) : anyValue(rng);
  const review: Json = {
    apiVersion: "admission.k8s.io/v1",
    kind: "AdmissionReview",
    request: {
      uid: `fuzz-${rng.int(1e9)}`,
      kind: { group: group ?? "", version: version ?? "", kind: t.kind },
      resource: { group: group ?? "", version: version ?? "", resource: t.path.split("/").pop() ?? "" },
      operation,
      namespace: "fuzz",
      name,
      object,
      ...(operation === "UPDATE" ? { oldObject: old ?? mutate(rng, named(t.seed, name)) } : {}),
      userInfo: { username: rng.pick(["fuzz", "system:serviceaccount:kubevirt:kubevirt-controller", ""]) },
    },
  };
  const body = rng.chance(0.85) ? json(rng.chance(0.8) ? review : mutate(rng, review)) : rawBody(rng, review);
  const path = rng.pick(t.webhooks ?? []);
  return { method: "POST", url: path, contentType: "application/json", body, to: "virtApi" };
}

const SUB = "/apis/subresources.kubevirt.io/v1/namespaces/fuzz";

function subresourceRequest(rng: Rng, name: string): Req {
  const body = rng.chance(0.7)
    ? json(
        rng.chance(0.5)
          ? { gracePeriod: rng.pick([0, -1, 30, 2 ** 63, "x"]), dryRun: rng.pick([["All"], ["x"], "All", null]) }
          : anyValue(rng),
      )
    : rawBody(rng, { gracePeriod: 0 });
  if (rng.chance(0.25))
    return { method: "PUT", url: `${SUB}/expand-vm-spec`, contentType: "application/json", body, to: "api" };
  const action = rng.pick(["start", "stop", "restart", "migrate"]);
  return {
    method: "PUT",
    url: `${SUB}/virtualmachines/${name}/${action}`,
    contentType: "application/json",
    body,
    to: "api",
  };
}

/** Runs iterations from `first` until `budgetMs` passes (or `count` iterations ran); never throws on answers. */
export async function runFuzz(
  ep: FuzzEndpoints,
  targets: readonly FuzzTarget[],
  options: {
    seed: number;
    budgetMs: number;
    first?: number;
    count?: number;
    refresh?: () => Promise<Map<string, Json>>;
  },
): Promise<FuzzReport> {
  const failures: FuzzFailure[] = [];
  const byStatus: Record<string, number> = {};
  const deadline = Date.now() + options.budgetMs;
  let stored = options.refresh ? await options.refresh() : new Map<string, Json>();
  let i = options.first ?? 0;
  const end = options.count === undefined ? Number.POSITIVE_INFINITY : i + options.count;
  for (; i < end && Date.now() < deadline; i++) {
    if (options.refresh && i % 50 === 0) stored = await options.refresh();
    const r = buildRequest(new SeededRng(options.seed, i), targets, stored);
    const answer = await send(ep, r);
    const asKubeVirt =
      answer.status === 500 && KUBEVIRT_5XX.some((k) => k.url.test(r.url) && answer.text.includes(k.message));
    const key = asKubeVirt ? "500 as KubeVirt" : String(answer.status);
    byStatus[key] = (byStatus[key] ?? 0) + 1;
    if (asKubeVirt || (typeof answer.status === "number" && answer.status < 500)) continue;
    const text = r.body.toString("utf8");
    failures.push({
      seed: options.seed,
      iteration: i,
      method: r.method,
      url: r.url,
      contentType: r.contentType,
      body: Buffer.from(text, "utf8").equals(r.body) ? text : `base64:${r.body.toString("base64")}`,
      status: answer.status,
      answer: answer.text.slice(0, 2000),
    });
  }
  return { seed: options.seed, iterations: i - (options.first ?? 0), byStatus, failures };
}
