/**
 * The local cluster's kube-proxy: watches Services and EndpointSlices and keeps the cluster's nftables table
 * (nft-ruleset.ts) in step, in the host's network namespace, where every node's pods meet on one bridge (so one
 * proxy serves all the simulated nodes).
 *
 *   informers (services, endpointslices) --change--> sync (coalesced) --> routes --> script
 *                                                     script unchanged: nothing; else `nft -f -` (one transaction)
 *                                                     nft failed: logged, tried again in {@link RETRY_MS}
 *                                                     table written: conntrack entries of flows to endpoints
 *                                                     that stopped serving deleted (conntrack.ts)
 *
 * Stopping leaves the rules in place (kube-proxy's behaviour: traffic keeps flowing across a restart); the cluster
 * removes the table with its pod network.
 */
import { CORE_V1, Informer, type RestTransport, resourceClient } from "@kvt/kube";
import type { Logger } from "@kvt/observability";
import type { V1EndpointSlice, V1Service } from "../cluster/kube-models.ts";
import { type ConntrackRunner, runConntrack, staleFlows } from "./conntrack.ts";
import { type NftRunner, runNft } from "./nft.ts";
import {
  type ProxyNetwork,
  renderRuleset,
  type ServiceInfo,
  type ServicePortRoute,
  type SliceInfo,
  serviceRoutes,
} from "./nft-ruleset.ts";

/** How long a failed `nft` run waits before the next try. */
export const RETRY_MS = 1000;

/** A Service as the rules need it (pure). */
export function serviceInfo(svc: V1Service): ServiceInfo {
  return {
    namespace: svc.metadata?.namespace ?? "",
    name: svc.metadata?.name ?? "",
    clusterIP: svc.spec?.type === "ExternalName" ? "" : (svc.spec?.clusterIP ?? ""),
    ports: (svc.spec?.ports ?? []).map((p) => ({ name: p.name ?? "", port: p.port, protocol: p.protocol ?? "TCP" })),
  };
}

/** An EndpointSlice as the rules need it (pure): unset conditions read as discovery.k8s.io/v1 says. */
export function sliceInfo(slice: V1EndpointSlice): SliceInfo | undefined {
  const serviceName = slice.metadata?.labels?.["kubernetes.io/service-name"];
  if (!serviceName || slice.addressType !== "IPv4") return undefined;
  return {
    namespace: slice.metadata?.namespace ?? "",
    serviceName,
    ports: (slice.ports ?? [])
      .filter((p) => typeof p.port === "number")
      .map((p) => ({ name: p.name ?? "", port: p.port as number, protocol: p.protocol ?? "TCP" })),
    endpoints: (slice.endpoints ?? []).map((e) => {
      const ready = e.conditions?.ready ?? true;
      return {
        addresses: e.addresses ?? [],
        ready,
        serving: e.conditions?.serving ?? ready,
        terminating: e.conditions?.terminating ?? false,
      };
    }),
  };
}

/** What the proxy needs. */
export interface ServiceProxyOptions {
  /** The API server (a @kvt/kube RestClient). */
  readonly transport: RestTransport;
  readonly network: ProxyNetwork;
  readonly log: Logger;
  /** Default {@link runNft}; tests pass a recorder. */
  readonly nft?: NftRunner;
  /** Default {@link runConntrack}; tests pass a recorder. */
  readonly conntrack?: ConntrackRunner;
}

/** Keeps the table in step with the API until stopped. */
export class ServiceProxy {
  readonly #o: ServiceProxyOptions;
  readonly #nft: NftRunner;
  readonly #conntrack: ConntrackRunner;
  readonly #services: Informer<V1Service>;
  readonly #slices: Informer<V1EndpointSlice>;
  #applied = "";
  /** The routes of the table in the kernel (what flows may still be DNATed to). */
  #routes: readonly ServicePortRoute[] = [];
  /** The sync in progress, if any. */
  #current: Promise<void> | undefined;
  #again = false;
  #stopped = false;
  /** Syncs wait for both caches: a half-listed cache would write a table missing routes. */
  #synced = false;
  #retry: ReturnType<typeof setTimeout> | undefined;

  constructor(options: ServiceProxyOptions) {
    this.#o = options;
    this.#nft = options.nft ?? runNft;
    this.#conntrack = options.conntrack ?? runConntrack;
    const { transport, log } = options;
    this.#services = new Informer<V1Service>({
      client: resourceClient<V1Service>(transport, CORE_V1.services),
      logger: log.child({ informer: "services" }),
    });
    this.#slices = new Informer<V1EndpointSlice>({
      client: resourceClient<V1EndpointSlice>(transport, CORE_V1.endpointSlices),
      logger: log.child({ informer: "endpointslices" }),
    });
  }

  /** Starts watching; resolves once both caches are filled and the first table is written. */
  async start(): Promise<void> {
    const kick = (): void => this.kick();
    // Lists and watches are retried by the informers themselves (backoff, relist on 410).
    for (const inf of [this.#services, this.#slices] as Informer<V1Service | V1EndpointSlice>[]) {
      inf.addHandlers({ onAdd: kick, onUpdate: kick, onDelete: kick });
      inf.start();
    }
    await Promise.all([this.#services.waitForSync(), this.#slices.waitForSync()]);
    this.#synced = true;
    this.kick();
    await this.#current;
  }

  /** Asks for a sync (coalesced with one in progress). */
  kick(): void {
    if (this.#stopped || !this.#synced) return;
    if (this.#current) {
      this.#again = true;
      return;
    }
    this.#current = this.#sync().finally(() => {
      this.#current = undefined;
    });
  }

  async #sync(): Promise<void> {
    do {
      this.#again = false;
      await this.#syncOnce();
    } while (this.#again && !this.#stopped);
  }

  async #syncOnce(): Promise<void> {
    const { network, log } = this.#o;
    const services = this.#services.store.list().map(serviceInfo);
    const slices = this.#slices.store
      .list()
      .map(sliceInfo)
      .filter((s): s is SliceInfo => s !== undefined);
    const problems: string[] = [];
    const routes = serviceRoutes(network, services, slices, (m) => problems.push(m));
    const script = renderRuleset(network, routes);
    if (script !== this.#applied) {
      const started = performance.now();
      try {
        await this.#nft(script);
      } catch (err) {
        // The kernel refused the script (or nft is gone): the old table stays whole; try again shortly.
        log.warn({ err, table: network.table }, "cannot write the service rules; retrying");
        clearTimeout(this.#retry);
        this.#retry = setTimeout(() => this.kick(), RETRY_MS);
        return;
      }
      this.#applied = script;
      const ports = routes.length;
      const backends = routes.reduce((n, r) => n + r.backends.length, 0);
      const ms = Math.round(performance.now() - started);
      log.info({ table: network.table, ports, backends, ms, ...(problems.length ? { problems } : {}) }, "rules synced");
    }
    // Only once the new table is in: a flow's next packet must meet the new rules, not the old DNAT again.
    const stale = staleFlows(this.#routes, routes);
    this.#routes = routes;
    await Promise.all(
      stale.map(async (flows) => {
        try {
          const deleted = await this.#conntrack(flows);
          log.info({ ...flows, deleted }, "flows to an endpoint that stopped serving cleared");
        } catch (err) {
          // Those flows stay pinned to the old endpoint until they time out, as they would without this step.
          log.warn({ err, ...flows }, "cannot clear the conntrack entries of an endpoint that stopped serving");
        }
      }),
    );
  }

  /** Stops watching (the rules stay). */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#retry);
    this.#services.stop();
    this.#slices.stop();
  }
}
