/**
 * Loading cluster access as kubectl does: an explicit kubeconfig file (`--kubeconfig`), else the files of
 * `$KUBECONFIG`, else the in-cluster service account, else `~/.kube/config`. A `$KUBECONFIG` list is merged as
 * kubectl merges it: files that do not exist are skipped, and for `current-context` and for each cluster, user and
 * context name the first file that sets it wins. A context other than the current one (`--context`) and another
 * server address (`--server`, keeping the cluster's CA and the user's credentials) may be asked for.
 *
 * The common configurations (a server with a bearer token, a token file, a client certificate, CA data or files,
 * insecure-skip-tls-verify, basic auth) are read here. Only a user with an `exec` or `auth-provider` plugin, or a
 * cluster behind a `proxy-url`, loads @kubernetes/client-node's KubeConfig, at first use: importing it costs every
 * process about 80 MiB of resident memory (its generated API models), which virt-handler on every node and the other
 * components do not need (docs/decisions/0002 has the transport).
 */
import { existsSync, readFileSync } from "node:fs";
import type { RequestOptions as HttpsRequestOptions } from "node:https";
import { homedir } from "node:os";
import { delimiter, dirname, isAbsolute, join } from "node:path";
import { parse as parseYaml } from "yaml";

/** What a transport needs of a kubeconfig (client-node's KubeConfig has the same two methods). */
export interface KubeAccess {
  /** The current context's cluster: its server URL, and a proxy when one is configured. */
  getCurrentCluster(): { readonly server: string; readonly proxyUrl?: string } | null;
  /** Puts CA, client certificate, TLS options and credentials (headers, basic auth, a proxy agent) into `opts`. */
  applyToHTTPSOptions(opts: HttpsRequestOptions): Promise<void>;
}

/** Cluster access as {@link loadKubeConfig} found it, and where from (for messages that say what to check). */
export interface LoadedKubeConfig extends KubeAccess {
  /** The context's namespace (in a pod: the service account's), if one is set; kubectl's default is `default`. */
  readonly namespace: string | undefined;
  /** The context used; undefined in a pod and for a `server` without a kubeconfig. */
  readonly context: string | undefined;
  /** The kubeconfig files read, in order (empty: in-cluster, or `server` without a kubeconfig). */
  readonly files: readonly string[];
}

/** Where {@link loadKubeConfig} looks. `env` defaults to `process.env` (read at call time, never at import). */
export interface KubeConfigSource {
  /** A kubeconfig path (the `--kubeconfig` flag). Wins over everything else. */
  readonly kubeconfig?: string;
  /** Environment to read `KUBECONFIG`, `HOME` and `KUBERNETES_SERVICE_HOST`/`_PORT` from. */
  readonly env?: Record<string, string | undefined>;
  /** The context to use (`--context`); default the kubeconfig's `current-context`. */
  readonly context?: string;
  /**
   * The API server address (`--server`), replacing the cluster's; its CA and the user's credentials still apply.
   * With no kubeconfig at all it is used alone (no credentials).
   */
  readonly server?: string;
}

/** The in-cluster service account's files (client-go's). */
export const SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount";

/** Loads cluster access; throws with a clear message when nothing is configured or a file is not a kubeconfig. */
export function loadKubeConfig(source: KubeConfigSource = {}): LoadedKubeConfig {
  const env = source.env ?? process.env;
  if (source.kubeconfig) return fromFiles([source.kubeconfig], source);
  // kubectl skips the files of the list that do not exist, and reads no ~/.kube/config when the list is set.
  const listed = env.KUBECONFIG?.split(delimiter).filter((f) => f !== "" && existsSync(f));
  if (listed?.length) return fromFiles(listed, source);
  if (env.KUBERNETES_SERVICE_HOST) return inClusterConfig(env, source.server);
  const home = join(env.HOME ?? homedir(), ".kube", "config");
  if (listed === undefined && existsSync(home)) return fromFiles([home], source);
  if (source.server) return new SimpleKubeConfig({ server: source.server }, {}, { files: [] });
  throw new Error(
    "Cannot find a kubeconfig: pass --kubeconfig FILE, set KUBECONFIG, create ~/.kube/config (as kubectl would use), or run in a cluster",
  );
}

/** Cluster access for `server` with a bearer `token` (plain http allowed; TLS not verified), for tests and tools. */
export function kubeConfigFor(server: string, token?: string): KubeAccess {
  return new SimpleKubeConfig({ server, insecure: true }, token === undefined ? {} : { token }, { files: [] });
}

/** A kubeconfig file's current context. */
export function kubeConfigFromFile(path: string): LoadedKubeConfig {
  return fromFiles([path], {});
}

/** The service account's cluster access; its namespace from `POD_NAMESPACE` or the account's file (client-go's). */
function inClusterConfig(env: Record<string, string | undefined>, server: string | undefined): LoadedKubeConfig {
  const host = env.KUBERNETES_SERVICE_HOST ?? "";
  const port = env.KUBERNETES_SERVICE_PORT ?? "443";
  const namespaceFile = join(SERVICE_ACCOUNT_DIR, "namespace");
  const namespace = env.POD_NAMESPACE ?? (existsSync(namespaceFile) ? readFileSync(namespaceFile, "utf8").trim() : "");
  return new SimpleKubeConfig(
    {
      server: server ?? `https://${host.includes(":") ? `[${host}]` : host}:${port}`,
      caFile: join(SERVICE_ACCOUNT_DIR, "ca.crt"),
    },
    { tokenFile: join(SERVICE_ACCOUNT_DIR, "token") },
    { files: [], namespace: namespace || undefined },
  );
}

interface ClusterEntry {
  readonly server: string;
  readonly caData?: string;
  readonly caFile?: string;
  readonly insecure?: boolean;
  readonly serverName?: string;
  readonly proxyUrl?: string;
}

interface UserEntry {
  readonly token?: string;
  readonly tokenFile?: string;
  readonly certData?: string;
  readonly certFile?: string;
  readonly keyData?: string;
  readonly keyFile?: string;
  readonly username?: string;
  readonly password?: string;
  /** exec or auth-provider: client-node's plugins handle it. */
  readonly plugin?: boolean;
}

type Doc = Record<string, unknown>;
const isDoc = (v: unknown): v is Doc => typeof v === "object" && v !== null && !Array.isArray(v);
const str = (o: Doc, k: string): string | undefined => (typeof o[k] === "string" ? o[k] : undefined);

/** The kubeconfig entries that hold file paths, which are relative to the file that names them. */
const PATH_KEYS = ["certificate-authority", "client-certificate", "client-key", "tokenFile"];

/** Several kubeconfig files merged, first wins: the raw entries by name, paths made absolute. */
interface MergedDoc {
  currentContext: string | undefined;
  readonly clusters: Map<string, Doc>;
  readonly users: Map<string, Doc>;
  readonly contexts: Map<string, Doc>;
}

/** The inner object of each named entry of `list` (`clusters`/`cluster`, ...) not yet in `into`. */
function mergeList(into: Map<string, Doc>, doc: Doc, list: string, key: string, base: string): void {
  for (const entry of Array.isArray(doc[list]) ? (doc[list] as unknown[]) : []) {
    if (!isDoc(entry) || typeof entry.name !== "string" || into.has(entry.name)) continue;
    const inner: Doc = isDoc(entry[key]) ? { ...entry[key] } : {};
    for (const k of PATH_KEYS) {
      const v = inner[k];
      if (typeof v === "string" && v !== "" && !isAbsolute(v)) inner[k] = join(base, v);
    }
    into.set(entry.name, inner);
  }
}

function readMerged(files: readonly string[]): MergedDoc {
  const merged: MergedDoc = { currentContext: undefined, clusters: new Map(), users: new Map(), contexts: new Map() };
  for (const path of files) {
    let doc: unknown;
    try {
      doc = parseYaml(readFileSync(path, "utf8"));
    } catch (err) {
      throw new Error(`kubeconfig ${path}: ${(err as Error).message}`, { cause: err });
    }
    if (doc === null || doc === undefined) continue; // an empty file, as kubectl reads it
    if (!isDoc(doc)) throw new Error(`kubeconfig ${path}: not a kubeconfig document`);
    merged.currentContext ??= str(doc, "current-context") || undefined;
    const base = dirname(path);
    mergeList(merged.clusters, doc, "clusters", "cluster", base);
    mergeList(merged.users, doc, "users", "user", base);
    mergeList(merged.contexts, doc, "contexts", "context", base);
  }
  return merged;
}

/** The entry `name` of `entries`, or a message naming what is missing. */
function entry(entries: Map<string, Doc>, what: string, name: string, where: string): Doc {
  const hit = entries.get(name);
  if (!hit) throw new Error(`kubeconfig ${where}: no ${what} named "${name}"`);
  return hit;
}

function fromFiles(files: readonly string[], source: KubeConfigSource): LoadedKubeConfig {
  const merged = readMerged(files);
  const where = files.join(delimiter);
  const contextName = source.context ?? merged.currentContext;
  if (!contextName) throw new Error(`kubeconfig ${where}: no current-context (pass --context)`);
  const context = entry(merged.contexts, "context", contextName, where);
  const clusterName = str(context, "cluster") ?? "";
  // With --server, a context may name no cluster (kubectl then has the address and nothing else).
  const c =
    source.server && !merged.clusters.has(clusterName) ? {} : entry(merged.clusters, "cluster", clusterName, where);
  const userName = str(context, "user");
  const u = userName ? entry(merged.users, "user", userName, where) : {};
  const server = source.server ?? str(c, "server");
  if (!server) throw new Error(`kubeconfig ${where}: cluster "${clusterName}" has no server`);
  const cluster: ClusterEntry = {
    server,
    caData: str(c, "certificate-authority-data"),
    caFile: str(c, "certificate-authority"),
    insecure: c["insecure-skip-tls-verify"] === true,
    serverName: str(c, "tls-server-name"),
    proxyUrl: str(c, "proxy-url"),
  };
  const user: UserEntry = {
    token: str(u, "token"),
    tokenFile: str(u, "tokenFile"),
    certData: str(u, "client-certificate-data"),
    certFile: str(u, "client-certificate"),
    keyData: str(u, "client-key-data"),
    keyFile: str(u, "client-key"),
    username: str(u, "username"),
    password: str(u, "password"),
    plugin: u.exec !== undefined || u["auth-provider"] !== undefined,
  };
  // What client-node gets for a plugin or a proxy: the one context, as resolved here.
  const document = {
    "current-context": contextName,
    contexts: [{ name: contextName, context }],
    clusters: [{ name: clusterName, cluster: { ...c, server } }],
    users: userName ? [{ name: userName, user: u }] : [],
  };
  return new SimpleKubeConfig(cluster, user, {
    files,
    context: contextName,
    namespace: str(context, "namespace") || undefined,
    document,
  });
}

/** Where a {@link SimpleKubeConfig} came from. */
interface Origin {
  readonly files: readonly string[];
  readonly context?: string;
  readonly namespace?: string;
  /** The resolved kubeconfig, for client-node (exec/auth-provider users, proxies). */
  readonly document?: Doc;
}

const b64 = (s: string): Buffer => Buffer.from(s, "base64");

/** The common configurations, read here; plugins and proxies through client-node, loaded at first use. */
class SimpleKubeConfig implements LoadedKubeConfig {
  readonly #cluster: ClusterEntry;
  readonly #user: UserEntry;
  readonly #document: Doc | undefined;
  readonly namespace: string | undefined;
  readonly context: string | undefined;
  readonly files: readonly string[];
  #delegate: Promise<KubeAccess> | undefined;

  constructor(cluster: ClusterEntry, user: UserEntry, origin: Origin) {
    this.#cluster = cluster;
    this.#user = user;
    this.#document = origin.document;
    this.namespace = origin.namespace;
    this.context = origin.context;
    this.files = origin.files;
  }

  getCurrentCluster(): { server: string; proxyUrl?: string } {
    const { server, proxyUrl } = this.#cluster;
    return proxyUrl ? { server, proxyUrl } : { server };
  }

  async applyToHTTPSOptions(opts: HttpsRequestOptions): Promise<void> {
    if ((this.#user.plugin || this.#cluster.proxyUrl) && this.#document) {
      this.#delegate ??= clientNodeKubeConfig(this.#document, this.context ?? "");
      return (await this.#delegate).applyToHTTPSOptions(opts);
    }
    // Files are read at every application (the transport re-applies every minute): rotated ones are picked up.
    const c = this.#cluster;
    const u = this.#user;
    if (c.caData) opts.ca = b64(c.caData);
    else if (c.caFile) opts.ca = readFileSync(c.caFile);
    if (c.insecure) opts.rejectUnauthorized = false;
    if (c.serverName) opts.servername = c.serverName;
    if (u.certData) opts.cert = b64(u.certData);
    else if (u.certFile) opts.cert = readFileSync(u.certFile);
    if (u.keyData) opts.key = b64(u.keyData);
    else if (u.keyFile) opts.key = readFileSync(u.keyFile);
    const token = u.token ?? (u.tokenFile ? readFileSync(u.tokenFile, "utf8").trim() : undefined);
    if (token) opts.headers = { ...opts.headers, Authorization: `Bearer ${token}` };
    else if (u.username !== undefined) opts.auth = `${u.username}:${u.password ?? ""}`;
  }
}

/** The oldest Node client-node runs on (its HTTP stack, undici 8, needs 22.19). */
const CLIENT_NODE_MIN = [22, 19] as const;

/** client-node's KubeConfig for the resolved `document` (exec and auth-provider plugins, proxies). */
async function clientNodeKubeConfig(document: Doc, context: string): Promise<KubeAccess> {
  const [major = 0, minor = 0] = process.versions.node.split(".").map(Number);
  const [minMajor, minMinor] = CLIENT_NODE_MIN;
  if (!("Deno" in globalThis) && (major < minMajor || (major === minMajor && minor < minMinor)))
    throw new Error(
      `kubeconfig context "${context}" takes its credentials from an exec or auth-provider plugin (or a proxy-url), which needs Node >= ${CLIENT_NODE_MIN.join(".")} (this is Node ${process.versions.node}): upgrade Node, or use a context whose user has a token or client certificate`,
    );
  const { KubeConfig } = await import("@kubernetes/client-node");
  const kc = new KubeConfig();
  kc.loadFromString(JSON.stringify(document));
  return kc;
}
