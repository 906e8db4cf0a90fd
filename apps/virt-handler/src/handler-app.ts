/**
 * virt-handler, assembled (main.ts and the integration test build it the same way):
 *
 *   VMI informer (all VMIs; only those whose status.nodeName or migrationState.targetNode is this node are queued)
 *     -> workqueue `virt-handler-vm` -> Runner -> VmiController (plan, launcher-rpc, status patch)
 *   LauncherRegistry (this node's socket dirs) -> re-queues a VMI when its launcher reports
 *   DeviceController: kubelet device plugins devices.kubevirt.io/kvm, tun, vhost-net (gRPC, the kubelet's dir)
 *   NodeHeartbeat (kubevirt.io/heartbeat, kubevirt.io/schedulable while the device plugins are registered)
 *   HandlerServer (pause/unpause/softreboot/console for virt-api; migration secrets for the other handlers)
 *   HandlerMigrationSecrets (held in memory as a migration's target; fetched from the target's handler as its source)
 *   MigratedFlows (with a conntrack deleter): every VMI's completed migration that moved its pod address -> the node's
 *     conntrack entries of flows to the old address deleted (beyond KubeVirt; network/migrated-flows.ts)
 *
 * Stopping leaves every launcher and guest running: a restarted handler re-adopts them from the socket dirs.
 */

import { type ObjectKey, objectKey, type VirtualMachineInstance } from "@kvt/api";
import {
  CORE_V1,
  Informer,
  KUBEVIRT_V1,
  type KubeAccess,
  type KubeObject,
  type Node,
  type ResourceClient,
  RestClient,
  Runner,
  resourceClient,
  statusError,
  WorkQueue,
} from "@kvt/kube";
import type { Logger, Registry } from "@kvt/observability";
import type { ConntrackDeleter } from "@kvt/pod-network";
import { DeviceController, permanentDevicePlugins } from "./device-manager/device-controller.ts";
import { HandlerServer, type HandlerServerTls } from "./http/handler-server.ts";
import { holdsGuest } from "./launchers/domain-choice.ts";
import { LauncherRegistry } from "./launchers/launcher-registry.ts";
import { OrphanReaper } from "./launchers/orphans.ts";
import { registerHandlerMetrics } from "./metrics/handler-metrics.ts";
import { registerVmiMetrics } from "./metrics/vmi-metrics.ts";
import { HandlerMigrationSecrets, type PinSourceCertificate } from "./migration/migration-secrets.ts";
import { MigratedFlows } from "./network/migrated-flows.ts";
import { PodNetworkWiring } from "./network/pod-network-wiring.ts";
import { NodeHeartbeat } from "./node/heartbeat.ts";
import { reconcileParent } from "./tracing/migration-trace.ts";
import { VmiController, type VmiStatusWriter } from "./vmi/vmi-controller.ts";

type Vmi = VirtualMachineInstance & KubeObject;

/** Options for {@link startHandlerApp}. */
export interface HandlerAppOptions {
  readonly nodeName: string;
  readonly kubeConfig: KubeAccess;
  /** The kubelet's pods directory, where launcher pods' sockets are (launchers/launcher-registry.ts). */
  readonly podsDir?: string;
  /** Directories of launchers run by hand. */
  readonly socketDirs?: readonly string[];
  readonly logger: Logger;
  readonly registry?: Registry;
  /**
   * Port of the server for virt-api and the other handlers (KubeVirt 8186; 0 = any) and its address, which the
   * handler publishes to the source handler of a migration to this node (so not a wildcard address).
   */
  readonly port: number;
  readonly host: string;
  /**
   * Mutual TLS of the server for virt-api and the other handlers (required: console and pause never go over plain
   * HTTP). Its pair is also this handler's client certificate towards the other handlers (migration secrets).
   */
  readonly tls: HandlerServerTls;
  readonly heartbeatPeriodMs?: number;
  readonly workers?: number;
  /**
   * The kubelet's device plugins directory, where this handler registers its device plugins (main.ts
   * --device-plugins-dir, default /var/lib/kubelet/device-plugins); absent: it offers no devices and the node is
   * schedulable without them (tests of other parts).
   */
  readonly devicePluginsDir?: string;
  /** Slots each device plugin advertises (KubeVirt's --max-devices, 1000). */
  readonly maxDevices?: number;
  /**
   * Plumb launcher pods' networks from here (main.ts --wire-pod-network; needs hostPID and privileges, as the
   * release's DaemonSet has): launchers without CAP_NET_ADMIN then only serve what the handler plumbed.
   */
  readonly wirePodNetwork?: boolean;
  /**
   * Deletes conntrack entries in the node's network namespace (main.ts --clear-migrated-flows): given, the handler
   * deletes the entries of flows to a pod address a VMI left in a live migration (network/migrated-flows.ts).
   */
  readonly clearMigratedFlows?: ConntrackDeleter;
}

/** A running handler. */
export interface HandlerApp {
  /** The bound port of the server for virt-api. */
  readonly port: number;
  /** Replaces the server's certificate and client CA (a rotated Secret). */
  updateTls(tls: Pick<HandlerServerTls, "cert" | "key" | "ca">): void;
  stop(): Promise<void>;
}

/**
 * What the stale-target rule of the orphan reaper reads of a VMI: its current migration and its node. Every informer
 * update is a new object, so comparing `migrationState` by reference would reap on each one.
 */
function placementOf(vmi: Vmi): string {
  return `${vmi.status?.migrationState?.migrationUid ?? ""}/${vmi.status?.nodeName ?? ""}`;
}

/** True when `vmi` concerns node `nodeName` (it runs there, or migrates there). */
/** KubeVirt's VMI CRD has no status subresource: status is patched on the object itself, labels merged. */
function vmiWriter(vmis: ResourceClient<Vmi>): VmiStatusWriter {
  return {
    patchStatus: (ns, name, ops) => vmis.patch(ns, name, ops),
    patchLabels: (ns, name, labels) => vmis.mergePatch(ns, name, { metadata: { labels } }),
  };
}

export function concernsNode(vmi: VirtualMachineInstance | undefined, nodeName: string): boolean {
  return vmi?.status?.nodeName === nodeName || vmi?.status?.migrationState?.targetNode === nodeName;
}

/** The handler's and the VMIs' metrics, when the app has a registry; the handler's metrics, to observe launchers. */
function registerMetrics(
  o: HandlerAppOptions,
  launchers: LauncherRegistry,
  cacheSynced: () => boolean,
): ReturnType<typeof registerHandlerMetrics> | undefined {
  if (!o.registry) return undefined;
  registerVmiMetrics(o.registry, { nodeName: o.nodeName, reports: () => launchers.all().map((v) => v.info) });
  return registerHandlerMetrics(o.registry, {
    nodeName: o.nodeName,
    launchers: () => launchers.all(),
    ready: () => cacheSynced() && launchers.synced,
  });
}

/** The node's device plugins (with a device plugins directory) and its heartbeat, which reports their state. */
function nodeAgents(
  o: HandlerAppOptions,
  nodes: ResourceClient<Node>,
): { devices: DeviceController | undefined; heartbeat: NodeHeartbeat } {
  const devices = o.devicePluginsDir
    ? new DeviceController({
        plugins: permanentDevicePlugins({
          devicePluginsDir: o.devicePluginsDir,
          logger: o.logger,
          ...(o.maxDevices ? { maxDevices: o.maxDevices } : {}),
        }),
        logger: o.logger,
      })
    : undefined;
  const heartbeat = new NodeHeartbeat({
    nodeName: o.nodeName,
    api: { patchNode: (name, patch) => nodes.mergePatch("", name, patch) },
    logger: o.logger,
    ...(o.heartbeatPeriodMs ? { periodMs: o.heartbeatPeriodMs } : {}),
    ...(devices ? { devicePlugins: devices } : {}),
  });
  return { devices, heartbeat };
}

/** Pins a source launcher's certificate in the target launcher of that VMI on this node (before the answer leaves). */
function pinIn(launchers: LauncherRegistry): PinSourceCertificate {
  return async (vmiUid, migrationUid, certificate) => {
    const view = launchers.forVmi(vmiUid).find((v) => !v.gone && v.info.migration?.role === "target");
    if (!view) throw statusError(409, "Conflict", `no target launcher of migration ${migrationUid} on this node yet`);
    await view.client.sourceCertificate({ migrationUid, certificate });
  };
}

/** The handler's client of the API server (its requests counted in the app's registry, when it has one). */
function apiClient(o: HandlerAppOptions): RestClient {
  return new RestClient(o.kubeConfig, {
    userAgent: `virt-handler/${o.nodeName}`,
    ...(o.registry ? { registry: o.registry } : {}),
  });
}

/** With a conntrack deleter: every VMI (not only this node's) goes through MigratedFlows as the informer sees it. */
function followMigratedFlows(informer: Informer<Vmi>, o: HandlerAppOptions): MigratedFlows | undefined {
  if (!o.clearMigratedFlows) return undefined;
  const flows = new MigratedFlows({
    deleter: o.clearMigratedFlows,
    logger: o.logger.child({ component: "migrated-flows" }),
  });
  informer.addHandlers({
    onAdd: (vmi) => flows.observe(vmi),
    onUpdate: (_old, vmi) => flows.observe(vmi),
    onDelete: (vmi) => vmi.metadata?.uid && flows.forget(vmi.metadata.uid),
  });
  return flows;
}

/** Starts everything; resolves once launchers are re-adopted and the cache is synced. */
export async function startHandlerApp(o: HandlerAppOptions): Promise<HandlerApp> {
  const rest = apiClient(o);
  const vmis = resourceClient<Vmi>(rest, KUBEVIRT_V1.virtualMachineInstances);
  const nodes = resourceClient<Node>(rest, CORE_V1.nodes);
  const informer = new Informer<Vmi>({ client: vmis, logger: o.logger.child({ informer: "vmi" }), resyncMs: 30_000 });
  const queue = new WorkQueue<ObjectKey>({ name: "virt-handler-vm", ...(o.registry ? { registry: o.registry } : {}) });
  const keysByUid = new Map<string, ObjectKey>();
  const enqueue = (vmi: Vmi): void => {
    const key = objectKey(vmi.metadata?.namespace, vmi.metadata?.name ?? "");
    if (vmi.metadata?.uid) keysByUid.set(vmi.metadata.uid, key);
    queue.add(key);
  };
  informer.addHandlers({
    onAdd: (vmi) => concernsNode(vmi, o.nodeName) && enqueue(vmi),
    onUpdate: (old, vmi) => {
      if (concernsNode(vmi, o.nodeName) || concernsNode(old, o.nodeName)) enqueue(vmi);
      // A new migration (or a move) may leave a target prepared here that nobody will use.
      if (placementOf(old) !== placementOf(vmi)) reaper.reap();
    },
    onDelete: (vmi) => {
      if (!vmi.metadata?.uid) return;
      keysByUid.delete(vmi.metadata.uid);
      reaper.vmiDeleted(vmi.metadata.uid, vmi.spec?.terminationGracePeriodSeconds);
    },
  });
  const migratedFlows = followMigratedFlows(informer, o);
  const launchers = new LauncherRegistry({
    ...(o.podsDir ? { podsDir: o.podsDir } : {}),
    ...(o.socketDirs ? { socketDirs: o.socketDirs } : {}),
    logger: o.logger.child({ component: "launcher-registry" }),
    onChange: (uid) => {
      handlerMetrics?.observe(uid);
      const key = keysByUid.get(uid);
      if (key) queue.add(key);
      else reaper.reap();
    },
  });
  const byUid = (uid: string): Vmi | undefined => informer.store.list().find((v) => v.metadata?.uid === uid);
  const reaper = new OrphanReaper({
    cacheSynced: () => informer.hasSynced,
    vmiOf: byUid,
    nodeName: o.nodeName,
    launchers: () => launchers.all(),
    logger: o.logger,
  });
  const handlerMetrics = registerMetrics(o, launchers, () => informer.hasSynced);
  let tls: HandlerServerTls = o.tls;
  let syncAddress: string | undefined; // set once the server listens
  const secrets = new HandlerMigrationSecrets({ nodeName: o.nodeName, tls: () => tls });
  const controller = new VmiController({
    nodeName: o.nodeName,
    vmis: informer.store,
    writer: vmiWriter(vmis),
    launchers,
    secrets,
    syncAddress: () => syncAddress,
    ...(o.wirePodNetwork ? { podNetwork: new PodNetworkWiring() } : {}),
  });
  const runner = new Runner({
    controller: "vmi",
    kind: "VirtualMachineInstance",
    queue,
    reconciler: controller,
    logger: o.logger,
    workers: o.workers ?? 3,
    ...(o.registry ? { registry: o.registry } : {}),
    parentOf: (key) => reconcileParent(informer.store.get(key)),
  });
  const { devices, heartbeat } = nodeAgents(o, nodes);
  const server = new HandlerServer({
    findVmi: (ns, name) => {
      const vmi = informer.store.get(objectKey(ns, name));
      return concernsNode(vmi, o.nodeName) ? vmi : undefined;
    },
    launcherFor: (uid) => launchers.forVmi(uid).find(holdsGuest) ?? launchers.forVmi(uid).find((v) => !v.gone),
    logger: o.logger,
    tls: o.tls,
    migrationSecret: (ns, name, migrationUid, callerNode, sourceCertificate) =>
      secrets.answer(
        informer.store.get(objectKey(ns, name)),
        migrationUid,
        callerNode,
        sourceCertificate,
        pinIn(launchers),
      ),
  });
  await launchers.start(); // re-adopt running launchers before deciding anything about their VMIs
  informer.start();
  await informer.waitForSync();
  // Serve before the first reconcile: a migration target's status publishes this server's address (syncAddress)
  // with its prepared launcher, and no event re-queues the VMI when the server comes up later. A handler restarted
  // during a migration to its node used to prepare the target while the heartbeat waited for the device plugins,
  // write the status without the address, and leave the source waiting for the informer's 30 s resync.
  // The server for virt-api is not what keeps guests alive: if its port is taken (two handlers on one host without
  // --port), say so loudly and keep reconciling rather than crash-loop the node agent.
  const port = await server.listen(o.port, o.host).catch((error: unknown) => {
    o.logger.error(
      { err: error, port: o.port },
      "cannot serve virt-api's endpoints (pass --port); console and pause unavailable",
    );
    return -1;
  });
  if (port >= 0) syncAddress = hostPort(o.host, port);
  const running = runner.run();
  reaper.reap(); // launchers re-adopted at start whose VMI went away while this handler was down
  devices?.start();
  await heartbeat.start();
  o.logger.info({ node: o.nodeName, port, launchers: launchers.all().length }, "virt-handler ready");
  return {
    port,
    updateTls: (material) => {
      server.updateTls(material);
      tls = { ...tls, ...material };
    },
    async stop() {
      if (port >= 0) await server.close();
      await heartbeat.stop();
      await devices?.stop();
      launchers.stop();
      informer.stop();
      migratedFlows?.stop();
      queue.shutDown();
      await running;
    },
  };
}

/** `host:port`, an IPv6 host in brackets. */
function hostPort(host: string, port: number): string {
  return host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`;
}
