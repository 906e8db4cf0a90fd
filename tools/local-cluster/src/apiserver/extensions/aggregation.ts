/**
 * API aggregation from stored APIService objects (apiregistration.k8s.io/v1), as kube-aggregator does it:
 *
 *   APIService <version>.<group> {service, caBundle, versionPriority}  --watch-->  one AggregatedApi per group
 *     requests under /apis/<group>/<version>/...  --proxy (TLS against caBundle, front-proxy client cert,
 *                                                  X-Remote-User / X-Remote-Group)-->  the service
 *     WebSocket upgrades (console)                --relayed byte for byte after the backend's 101
 *     discovery: the backend's /apis/<group>/<version> APIResourceList, fetched in the background (every 60 s,
 *                every 5 s while it fails) and shown in /apis (legacy and aggregated v2); the APIService's
 *                Available condition says whether the last fetch worked
 *
 * The transport is virt-api's `AggregationProxy` (any group: it forwards the path as it came). A Service reference
 * is reached through the APIService's `kubevirt-ts.io/service-url` annotation, else `https://<name>.<ns>.svc:<port>`;
 * either way the backend's certificate must name `<name>.<ns>.svc`, as kube-aggregator verifies it.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { request as httpsRequest } from "node:https";
import type { Duplex } from "node:stream";
import { AggregationProxy } from "@kvt/virt-api/lib";
import type { Logger } from "pino";
import type { AggregatedApi, UserInfo } from "../http/server.ts";
import { type ResourceService, systemContext } from "../rest/service.ts";
import { isObject, type Json, type JsonObject, type KubeObject, nowTime } from "../types.ts";
import { caBundlePem, clientConfigUrl, SERVICE_URL_ANNOTATION, serviceServerName } from "./webhook-rules.ts";

const APISERVICES = "apiregistration.k8s.io/apiservices";

/** The front-proxy client certificate the API server presents to aggregated servers (PEM). */
export interface ProxyClientCert {
  readonly certPem: string;
  readonly keyPem: string;
}

interface Backend {
  readonly apiService: string;
  readonly version: string;
  readonly priority: number;
  readonly url: string;
  readonly caPem: string;
  /** The Service's DNS name the backend's certificate is verified against (kube-aggregator's). */
  readonly serverName: string | undefined;
  readonly proxy: AggregationProxy;
  resources: Json[] | undefined;
  nextFetch: number;
}

/** One aggregated group: every registered version of it, each proxied to its APIService's backend. */
export class AggregatedGroup implements AggregatedApi {
  readonly group: string;
  readonly #backends: Backend[];

  constructor(group: string, backends: Backend[]) {
    this.group = group;
    this.#backends = [...backends].sort((a, b) => b.priority - a.priority || a.version.localeCompare(b.version));
  }

  /** Served versions, highest versionPriority first. */
  get versions(): readonly string[] {
    return this.#backends.map((b) => b.version);
  }

  /** The backends (for the discovery refresher). */
  get backends(): readonly Backend[] {
    return this.#backends;
  }

  /** Legacy discovery resources of `version` (empty until the backend answered discovery). */
  resources(version: string): Json[] {
    return this.#backend(version)?.resources ?? [];
  }

  #backend(version: string | undefined): Backend | undefined {
    return this.#backends.find((b) => b.version === version);
  }

  #versionOf(req: IncomingMessage): string | undefined {
    return (req.url ?? "").split("?")[0]?.split("/")[3];
  }

  /** Proxies a plain request under /apis/<group>/<version>. */
  handle(req: IncomingMessage, res: ServerResponse, user: UserInfo): Promise<void> {
    const b = this.#backend(this.#versionOf(req));
    if (!b) return Promise.reject(new Error(`no backend for ${req.url ?? ""}`));
    return b.proxy.handle(req, res, user);
  }

  /** Relays a WebSocket upgrade; false when no backend serves the path's version. */
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer, user: UserInfo): boolean {
    const b = this.#backend(this.#versionOf(req));
    if (!b) return false;
    b.proxy.upgrade(req, socket, head, user);
    return true;
  }
}

function backendOf(obj: KubeObject, client: ProxyClientCert | undefined): Backend | undefined {
  const spec = (obj as { spec?: Json }).spec;
  if (!isObject(spec) || typeof spec.group !== "string" || typeof spec.version !== "string") return undefined;
  if (!isObject(spec.service)) return undefined; // a local APIService: served by this server itself
  const url = clientConfigUrl(
    { service: { ...spec.service, path: "" } },
    obj.metadata.annotations?.[SERVICE_URL_ANNOTATION],
  );
  if (!url) return undefined;
  const caPem = caBundlePem(spec.caBundle) ?? "";
  const serverName = serviceServerName({ service: spec.service });
  return {
    apiService: obj.metadata.name ?? "",
    version: spec.version,
    priority: typeof spec.versionPriority === "number" ? spec.versionPriority : 0,
    url,
    caPem,
    serverName,
    proxy: new AggregationProxy({
      url,
      caPem,
      serverName,
      clientCertPem: client?.certPem ?? "",
      clientKeyPem: client?.keyPem ?? "",
    }),
    resources: undefined,
    nextFetch: 0,
  };
}

/** Fetches `/apis/<group>/<version>` from a backend as the aggregator (system:kube-aggregator). */
function fetchDiscovery(b: Backend, group: string, client: ProxyClientCert | undefined): Promise<Json[]> {
  return new Promise((resolve, reject) => {
    const url = new URL(`/apis/${group}/${b.version}`, b.url);
    const req = httpsRequest(
      url,
      {
        ca: b.caPem || undefined,
        ...(b.serverName ? { servername: b.serverName } : {}),
        cert: client?.certPem,
        key: client?.keyPem,
        headers: {
          accept: "application/json",
          "x-remote-user": "system:kube-aggregator",
          "x-remote-group": "system:masters",
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("error", reject);
        res.on("end", () => {
          try {
            if (res.statusCode !== 200) throw new Error(`bad status from ${url.toString()}: ${res.statusCode ?? 0}`);
            const list = JSON.parse(Buffer.concat(chunks).toString("utf8")) as Json;
            if (!isObject(list) || !Array.isArray(list.resources))
              throw new Error("the answer is not an APIResourceList");
            resolve(list.resources);
          } catch (err) {
            reject(err instanceof Error ? err : new Error(String(err)));
          }
        });
      },
    );
    req.setTimeout(5000, () => req.destroy(new Error("discovery request timed out")));
    req.on("error", reject);
    req.end();
  });
}

/** Keeps the server's `aggregated` list in step with the stored APIServices. */
export class ApiServiceAggregator {
  readonly #svc: ResourceService;
  readonly #aggregated: AggregatedApi[];
  readonly #logger: Logger;
  readonly #client: ProxyClientCert | undefined;
  #key = "";
  #groups: AggregatedGroup[] = [];
  #unsubscribe: (() => void) | undefined;
  #timer: NodeJS.Timeout | undefined;
  #inFlight: Promise<void> | undefined;
  #stopped = false;

  constructor(svc: ResourceService, aggregated: AggregatedApi[], logger: Logger, client?: ProxyClientCert) {
    this.#svc = svc;
    this.#aggregated = aggregated;
    this.#logger = logger;
    this.#client = client;
  }

  /** Reads the APIServices now and whenever one changes; refreshes discovery in the background. */
  start(): void {
    this.sync();
    this.#unsubscribe = this.#svc.store.subscribe((ev) => {
      if (ev.coll === APISERVICES) this.sync();
    });
    this.#timer = setInterval(() => void this.refresh(), 1000);
    this.#timer.unref();
  }

  /** Stops following changes; resolves once no discovery refresh (and its status write) is running. */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#unsubscribe?.();
    if (this.#timer) clearInterval(this.#timer);
    await this.#inFlight;
  }

  /** The aggregated group serving `group`, if any. */
  group(name: string): AggregatedGroup | undefined {
    return this.#groups.find((g) => g.group === name);
  }

  /** Rebuilds the groups when an APIService's spec (or URL annotation) changed. */
  sync(): void {
    const objs = this.#svc.store.list(APISERVICES).map((e) => e.obj);
    const key = JSON.stringify(
      objs.map((o) => [o.metadata.name, o.metadata.annotations?.[SERVICE_URL_ANNOTATION], o.spec]),
    );
    if (key === this.#key) return;
    this.#key = key;
    const byGroup = new Map<string, Backend[]>();
    for (const o of objs) {
      const b = backendOf(o, this.#client);
      const group = (o.spec as { group?: string } | undefined)?.group;
      if (!b || !group) continue;
      const old = this.group(group)?.backends.find((x) => x.version === b.version && x.url === b.url);
      if (old) b.resources = old.resources;
      byGroup.set(group, [...(byGroup.get(group) ?? []), b]);
    }
    this.#groups = [...byGroup].map(([g, bs]) => new AggregatedGroup(g, bs));
    const others = this.#aggregated.filter((a) => !(a instanceof AggregatedGroup));
    this.#aggregated.splice(0, this.#aggregated.length, ...others, ...this.#groups);
    this.#logger.info({ groups: this.#groups.map((g) => `${g.group}/${g.versions.join(",")}`) }, "aggregated APIs");
    void this.refresh();
  }

  /** Fetches discovery from backends that are due and records Available on their APIService. */
  refresh(now: number = Date.now()): Promise<void> {
    if (this.#inFlight || this.#stopped) return this.#inFlight ?? Promise.resolve();
    this.#inFlight = this.#refresh(now).finally(() => {
      this.#inFlight = undefined;
    });
    return this.#inFlight;
  }

  async #refresh(now: number): Promise<void> {
    for (const g of this.#groups)
      for (const b of g.backends) {
        if (b.nextFetch > now || this.#stopped) continue;
        try {
          b.resources = await fetchDiscovery(b, g.group, this.#client);
          b.nextFetch = Date.now() + 60_000;
          await this.#setAvailable(b, true, "Passed", "all checks passed");
        } catch (err) {
          b.nextFetch = Date.now() + 5_000;
          const msg = `failing or missing response from ${b.url}/apis/${g.group}/${b.version}: ${(err as Error).message}`;
          await this.#setAvailable(b, false, "FailedDiscoveryCheck", msg);
        }
      }
  }

  async #setAvailable(b: Backend, ok: boolean, reason: string, message: string): Promise<void> {
    const def = this.#svc.registry.lookup("apiregistration.k8s.io", "v1", "apiservices");
    const cur = this.#svc.store.get(APISERVICES, b.apiService)?.obj;
    if (!def || !cur || this.#stopped) return;
    const status = isObject(cur.status) ? cur.status : {};
    const conds = (Array.isArray(status.conditions) ? status.conditions : []).filter(isObject);
    const prev = conds.find((c) => c.type === "Available");
    const want = ok ? "True" : "False";
    if (prev?.status === want && prev.reason === reason) return;
    const next = structuredClone(cur);
    const cond: JsonObject = { type: "Available", status: want, lastTransitionTime: nowTime(), reason, message };
    next.status = { ...status, conditions: [...conds.filter((c) => c.type !== "Available"), cond] };
    try {
      await this.#svc.update(
        def,
        "v1",
        undefined,
        b.apiService,
        next,
        systemContext("system:kube-aggregator"),
        "status",
      );
    } catch (err) {
      // A concurrent write (409) or a deleted APIService: the next refresh writes the condition again.
      this.#logger.debug({ err, apiService: b.apiService }, "could not update APIService status");
    }
  }
}
