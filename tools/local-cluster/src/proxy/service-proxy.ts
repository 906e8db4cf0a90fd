/**
 * The local cluster's kube-proxy: watches Services and EndpointSlices and keeps the cluster's nftables table
 * (nft-ruleset.ts) in step, in the host's network namespace, where every node's pods meet on one bridge (so one
 * proxy serves all the simulated nodes).
 *
 *   informers (services, endpointslices) --change--> sync (coalesced) --> routes --> script
 *                                                     script unchanged: nothing; else `nft -f -` (one transaction)
 *                                                     nft failed: logged, tried again in {@link RETRY_MS}
 *
 * Stopping leaves the rules in place (kube-proxy's behaviour: traffic keeps flowing across a restart); the cluster
 * removes the table with its pod network.
 */
import {
  CoreV1Api,
  DiscoveryV1Api,
  type KubeConfig,
  type KubernetesObject,
  type ListWatch,
  type V1EndpointSlice,
  type V1Service,
} from "@kubernetes/client-node";
import type { Logger } from "@kvt/observability";
import { makeInformer } from "../cluster/informer.ts";
import { type NftRunner, runNft } from "./nft.ts";
import { type ProxyNetwork, renderRuleset, type ServiceInfo, type SliceInfo, serviceRoutes } from "./nft-ruleset.ts";

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
  readonly kubeConfig: KubeConfig;
  readonly network: ProxyNetwork;
  readonly log: Logger;
  /** Default {@link runNft}; tests pass a recorder. */
  readonly nft?: NftRunner;
}

/** Keeps the table in step with the API until stopped. */
export class ServiceProxy {
  readonly #o: ServiceProxyOptions;
  readonly #nft: NftRunner;
  #services?: ListWatch<V1Service>;
  #slices?: ListWatch<V1EndpointSlice>;
  #applied = "";
  /** The sync in progress, if any. */
  #current: Promise<void> | undefined;
  #again = false;
  #stopped = false;
  #retry: ReturnType<typeof setTimeout> | undefined;

  constructor(options: ServiceProxyOptions) {
    this.#o = options;
    this.#nft = options.nft ?? runNft;
  }

  /** Starts watching; resolves once both caches are filled and the first table is written. */
  async start(): Promise<void> {
    const { kubeConfig, log } = this.#o;
    const core = kubeConfig.makeApiClient(CoreV1Api);
    const discovery = kubeConfig.makeApiClient(DiscoveryV1Api);
    this.#services = makeInformer<V1Service>(kubeConfig, "/api/v1/services", () => core.listServiceForAllNamespaces());
    this.#slices = makeInformer<V1EndpointSlice>(kubeConfig, "/apis/discovery.k8s.io/v1/endpointslices", () =>
      discovery.listEndpointSliceForAllNamespaces(),
    );
    for (const inf of [this.#services, this.#slices] as ListWatch<KubernetesObject>[]) {
      for (const verb of ["add", "update", "delete"] as const) inf.on(verb, () => this.kick());
      inf.on("error", (err: unknown) => {
        log.warn({ err }, "service proxy watch failed; restarting it in 1s");
        setTimeout(() => void inf.start().catch(() => undefined), 1000);
      });
    }
    await Promise.all([this.#services.start(), this.#slices.start()]);
    this.kick();
    await this.#current;
  }

  /** Asks for a sync (coalesced with one in progress). */
  kick(): void {
    if (this.#stopped) return;
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
    const services = (this.#services?.list() ?? []).map(serviceInfo);
    const slices = (this.#slices?.list() ?? []).map(sliceInfo).filter((s): s is SliceInfo => s !== undefined);
    const problems: string[] = [];
    const routes = serviceRoutes(network, services, slices, (m) => problems.push(m));
    const script = renderRuleset(network, routes);
    if (script === this.#applied) return;
    const started = performance.now();
    try {
      await this.#nft(script);
      this.#applied = script;
      const ports = routes.length;
      const backends = routes.reduce((n, r) => n + r.backends.length, 0);
      const ms = Math.round(performance.now() - started);
      log.info({ table: network.table, ports, backends, ms, ...(problems.length ? { problems } : {}) }, "rules synced");
    } catch (err) {
      // The kernel refused the script (or nft is gone): the old table stays whole; try again shortly.
      log.warn({ err, table: network.table }, "cannot write the service rules; retrying");
      clearTimeout(this.#retry);
      this.#retry = setTimeout(() => this.kick(), RETRY_MS);
    }
  }

  /** Stops watching (the rules stay). */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#retry);
    await Promise.all([this.#services?.stop(), this.#slices?.stop()]);
  }
}
