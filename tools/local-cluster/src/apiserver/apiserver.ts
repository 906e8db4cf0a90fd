/**
 * Composition root of the embedded API server: store -> registry -> admission -> service -> watch hub ->
 * controllers (GC, namespaces, CRD cleanup) -> HTTP. `startApiServer` is what tests, `npm run apiserver` and the
 * local cluster use.
 */
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { closeServer, trackSockets } from "@kvt/runtime";
import { type Logger, pino } from "pino";
import { startVolumeControllers } from "../volumes/start.ts";
import { defaultTolerationSecondsAdmission } from "./admission/default-toleration-seconds.ts";
import { ownerReferencesAdmission } from "./admission/owner-references.ts";
import { defaultStorageClassAdmission, storageProtectionAdmission } from "./admission/storage-admission.ts";
import { AdmissionChain } from "./admission/types.ts";
import { AuditingAuthorizer, AuthorizationAuditLog } from "./auth/authorization-audit.ts";
import { ensureBootstrapPolicy } from "./auth/bootstrap-policy.ts";
import { NodeAuthorizer } from "./auth/node-authorizer.ts";
import { nodeRestrictionAdmission } from "./auth/node-restriction.ts";
import { type Authorizer, RbacAuthorizer } from "./auth/rbac.ts";
import { readTokenFile } from "./auth/token-file.ts";
import { startControllers } from "./controllers/index.ts";
import type { ProxyClientCert } from "./extensions/aggregation.ts";
import { installExtensions } from "./extensions/install-extensions.ts";
import type { KubeletClientTls } from "./extensions/pod-logs.ts";
import { builtinSubresources } from "./http/builtin-subresources.ts";
import { loadOrGenerateCerts } from "./http/certs.ts";
import { OpenApiV3 } from "./http/openapi.ts";
import type { SubresourceHandler } from "./http/resource-handler.ts";
import { type AggregatedApi, createApiHttpServer, type UserInfo } from "./http/server.ts";
import { tokenRequest } from "./http/token-request.ts";
import { writeKubeconfig } from "./kubeconfig.ts";
import { makeDataDirPrivate } from "./private-data-dir.ts";
import { ResourceRegistry } from "./resources/registry.ts";
import { ResourceService, systemContext } from "./rest/service.ts";
import { Store } from "./storage/store.ts";
import { WatchHub } from "./watch/hub.ts";

/** Options of {@link startApiServer}. Give `dataDir` (durable) or `inMemory: true`. */
export interface ApiServerOptions {
  readonly dataDir?: string;
  readonly inMemory?: boolean;
  /** TCP port on 127.0.0.1; 0 (default) picks a free one. */
  readonly port?: number;
  /** Where to write the kubeconfig (default `<dataDir>/kubeconfig`, or a temp file in memory mode). */
  readonly kubeconfigPath?: string;
  readonly logger?: Logger;
  /** Watch history retention (defaults: 10 minutes, at least 100,000 events). */
  readonly historyMs?: number;
  readonly historyMinEvents?: number;
  /** Serve HTTPS with a generated CA (default true; kubectl sends no bearer token over plain HTTP). */
  readonly tls?: boolean;
  /** Front-proxy client certificate presented to aggregated API servers (`--proxy-client-cert/--proxy-client-key`). */
  readonly proxyClient?: ProxyClientCert;
  /** Credentials towards the kubelets' log ports (kube-apiserver `--kubelet-client-certificate` and friends). */
  readonly kubeletClient?: KubeletClientTls;
  /**
   * Where the local-path provisioner keeps volume directories (the local cluster gives `<dataDir>/storage`). When
   * set, the default StorageClass `local-path` is created and its claims are provisioned; without it, claims bind
   * only to existing PersistentVolumes.
   */
  readonly storageDir?: string;
  /**
   * Static bearer tokens (kube-apiserver `--token-auth-file`: `token,user,uid,"groups"` lines), read at start: the
   * local cluster's scheduler and kubelets authenticate with them.
   */
  readonly tokenAuthFile?: string;
  /** The range Services' ClusterIPs come from (kube-apiserver `--service-cluster-ip-range`; default 10.96.0.0/12). */
  readonly serviceClusterIpRange?: string;
  /**
   * Append the authorization audit to this file (auth/authorization-audit.ts: one JSON line per distinct decision,
   * with the RBAC rules that allowed it); default none.
   */
  readonly authorizationAuditLog?: string;
}

/** A running server. */
export interface ApiServerHandle {
  /** `https://127.0.0.1:<port>` (or http:// with `tls: false`). */
  readonly url: string;
  /** The admin bearer token. */
  readonly token: string;
  /** The CA certificate (PEM) when serving TLS. */
  readonly caCert: string | undefined;
  readonly kubeconfigPath: string;
  /** Extension point: mutating and validating admission plugins. */
  readonly admission: AdmissionChain;
  /** Extension point: subresource handlers by `<group or core>/<resource>/<subresource>` (e.g. `core/pods/log`). */
  readonly subresources: Map<string, SubresourceHandler>;
  /** Extension point: aggregated API group-versions (e.g. subresources.kubevirt.io). */
  readonly aggregated: AggregatedApi[];
  /** In-process access to the generic registry (for controllers in the same process and tests). */
  readonly service: ResourceService;
  /** Compacts watch history up to `rev` (tests use it to force 410 Expired). */
  compact(rev?: number): void;
  /** Stops serving, commits and closes storage. */
  stop(): Promise<void>;
}

const BOOT_NAMESPACES = ["default", "kube-system", "kube-public", "kube-node-lease"];

/**
 * KubeVirt's service accounts the local cluster's components run as (namespace `kubevirt`): each gets its own token
 * and a kubeconfig `kubeconfig-<account>` beside the admin one, so admission sees virt-controller and virt-handler
 * as KubeVirt does on a real cluster (virt-api lets only them change a VMI's spec and reserved labels), and RBAC
 * gives each what deploy/'s roles grant that account.
 */
export const KUBEVIRT_SERVICE_ACCOUNTS = ["kubevirt-apiserver", "kubevirt-controller", "kubevirt-handler"] as const;

function loadToken(dataDir: string | undefined, file = "token"): string {
  if (dataDir) {
    const f = join(dataDir, file);
    if (existsSync(f)) return readFileSync(f, "utf8").trim();
    const t = randomBytes(32).toString("hex");
    writeFileSync(f, `${t}\n`, { mode: 0o600 });
    return t;
  }
  return randomBytes(32).toString("hex");
}

/** The request authorizer (Node, then RBAC), recording the authorization audit to `auditFile` when given. */
function requestAuthorizer(
  store: Store,
  auditFile: string | undefined,
): { authorizer: Authorizer; auditLog?: AuthorizationAuditLog } {
  const rbac = new RbacAuthorizer(store);
  const decider = new NodeAuthorizer(store, rbac);
  if (!auditFile) return { authorizer: decider };
  const auditLog = new AuthorizationAuditLog(auditFile);
  return { authorizer: new AuditingAuthorizer(decider, rbac, auditLog), auditLog };
}

/** The admission plugins kube-apiserver runs that the server always runs (webhooks are added later). */
function admissionChain(store: Store, registry: ResourceRegistry, authorizer: Authorizer): AdmissionChain {
  const admission = new AdmissionChain();
  admission.mutating.push(
    defaultStorageClassAdmission(store),
    storageProtectionAdmission(),
    defaultTolerationSecondsAdmission(),
  );
  admission.validating.push(nodeRestrictionAdmission(), ownerReferencesAdmission(registry, authorizer));
  return admission;
}

/** Starts an API server on 127.0.0.1 and writes its kubeconfig once it is ready. */
export async function startApiServer(options: ApiServerOptions): Promise<ApiServerHandle> {
  if (!options.dataDir && !options.inMemory) throw new Error("startApiServer: give dataDir or inMemory: true");
  const logger = options.logger ?? pino({ level: "silent" });
  if (options.dataDir) makeDataDirPrivate(options.dataDir, "state.db");
  const store = Store.open({
    path: options.dataDir ? join(options.dataDir, "state.db") : undefined,
    historyMs: options.historyMs,
    historyMinEvents: options.historyMinEvents,
    logger,
  });
  const registry = new ResourceRegistry(store, logger, options.serviceClusterIpRange);
  const { authorizer, auditLog } = requestAuthorizer(store, options.authorizationAuditLog);
  const admission = admissionChain(store, registry, authorizer);
  const service = new ResourceService(store, registry, admission, logger);
  const hub = new WatchHub(store);
  const openapi = new OpenApiV3(registry);
  const nsDef = registry.lookup("", "v1", "namespaces");
  for (const ns of BOOT_NAMESPACES)
    if (nsDef && !store.get("core/namespaces", ns))
      await service.create(nsDef, "v1", undefined, { metadata: { name: ns } }, systemContext());
  await ensureBootstrapPolicy(service);
  const certs = options.tls === false ? undefined : await loadOrGenerateCerts(options.dataDir);
  const controllers = startControllers(service, logger, certs?.caCert);
  const volumes = await startVolumeControllers(service, options.storageDir, logger);
  const token = loadToken(options.dataDir);
  const subresources = builtinSubresources();
  const aggregated: AggregatedApi[] = [];
  const tokens = new Map<string, UserInfo>([
    [token, { username: "kubernetes-admin", groups: ["system:masters", "system:authenticated"] }],
  ]);
  const accountTokens = KUBEVIRT_SERVICE_ACCOUNTS.map((sa) => {
    const t = loadToken(options.dataDir, `token-${sa}`);
    tokens.set(t, {
      username: `system:serviceaccount:kubevirt:${sa}`,
      groups: ["system:serviceaccounts", "system:serviceaccounts:kubevirt", "system:authenticated"],
    });
    return { sa, token: t };
  });
  for (const t of options.tokenAuthFile ? readTokenFile(options.tokenAuthFile) : [])
    tokens.set(t.token, { username: t.username, groups: [...t.groups, "system:authenticated"] });
  subresources.set("core/serviceaccounts/token", tokenRequest(tokens));
  const server = createApiHttpServer(
    {
      svc: service,
      hub,
      openapi,
      logger,
      tokens,
      authorizer,
      subresources,
      aggregated,
    },
    certs,
  );
  const sockets = trackSockets(server);
  const extensions = installExtensions({
    server,
    service,
    admission,
    subresources,
    aggregated,
    tokens,
    authorizer,
    logger,
    proxyClient: options.proxyClient,
    kubeletClient: options.kubeletClient,
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, "127.0.0.1", () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  const url = `${certs ? "https" : "http"}://127.0.0.1:${port}`;
  let tmp: string | undefined;
  let kubeconfigPath = options.kubeconfigPath;
  if (!kubeconfigPath) {
    if (options.dataDir) kubeconfigPath = join(options.dataDir, "kubeconfig");
    else {
      tmp = mkdtempSync(join(tmpdir(), "kvt-apiserver-"));
      kubeconfigPath = join(tmp, "kubeconfig");
    }
  }
  for (const { sa, token: t } of accountTokens) {
    writeKubeconfig(join(dirname(kubeconfigPath), `kubeconfig-${sa}`), url, t, certs?.caCert);
  }
  writeKubeconfig(kubeconfigPath, url, token, certs?.caCert); // last: waiters on it find the others too
  const compactTimer = setInterval(() => store.compact(), 30_000);
  compactTimer.unref();
  logger.info({ url, kubeconfig: kubeconfigPath, revision: store.revision }, "API server ready");
  let stopped = false;
  return {
    url,
    token,
    caCert: certs?.caCert,
    kubeconfigPath,
    admission,
    subresources,
    aggregated,
    service,
    compact: (rev?: number) => store.compact(rev ?? store.revision),
    stop: async () => {
      if (stopped) return;
      stopped = true;
      clearInterval(compactTimer);
      controllers.stop();
      volumes.stop();
      await extensions.stop();
      const destroyed = await closeServer(server, sockets);
      if (destroyed > 0) logger.debug({ sockets: destroyed }, "closed connections the HTTP layer had not");
      await store.close();
      auditLog?.close();
      if (tmp) rmSync(tmp, { recursive: true, force: true });
    },
  };
}
