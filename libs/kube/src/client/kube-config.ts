/**
 * Loading cluster access: from an explicit kubeconfig file, from `$KUBECONFIG`, from the in-cluster service account,
 * or from `~/.kube/config`, in that order.
 *
 * The common configurations (a server with a bearer token, a token file, a client certificate, CA data or files,
 * insecure-skip-tls-verify, basic auth) are read here. Only a user with an `exec` or `auth-provider` plugin, or a
 * cluster behind a `proxy-url`, loads @kubernetes/client-node's KubeConfig, at first use: importing it costs every
 * process about 80 MiB of resident memory (its generated API models), which virt-handler on every node and the other
 * components do not need (issue 21's footprint; docs/decisions/0002 has the transport).
 */
import { existsSync, readFileSync } from "node:fs";
import type { RequestOptions as HttpsRequestOptions } from "node:https";
import { homedir } from "node:os";
import { dirname, isAbsolute, join } from "node:path";
import { parse as parseYaml } from "yaml";

/** What a transport needs of a kubeconfig (client-node's KubeConfig has the same two methods). */
export interface KubeAccess {
  /** The current context's cluster: its server URL, and a proxy when one is configured. */
  getCurrentCluster(): { readonly server: string; readonly proxyUrl?: string } | null;
  /** Puts CA, client certificate, TLS options and credentials (headers, basic auth, a proxy agent) into `opts`. */
  applyToHTTPSOptions(opts: HttpsRequestOptions): Promise<void>;
}

/** Where {@link loadKubeConfig} looks. `env` defaults to `process.env` (read at call time, never at import). */
export interface KubeConfigSource {
  /** A kubeconfig path (the `--kubeconfig` flag). Wins over everything else. */
  readonly kubeconfig?: string;
  /** Environment to read `KUBECONFIG` / `KUBERNETES_SERVICE_HOST` from. */
  readonly env?: Record<string, string | undefined>;
}

/** The in-cluster service account's files (client-go's). */
export const SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount";

/** Loads cluster access; throws with a clear message when nothing is configured or the file is not a kubeconfig. */
export function loadKubeConfig(source: KubeConfigSource = {}): KubeAccess {
  const env = source.env ?? process.env;
  const file = source.kubeconfig ?? env.KUBECONFIG?.split(":")[0];
  if (file) return kubeConfigFromFile(file);
  if (env.KUBERNETES_SERVICE_HOST) return inClusterConfig(env);
  const home = join(env.HOME ?? homedir(), ".kube", "config");
  if (existsSync(home)) return kubeConfigFromFile(home);
  throw new Error("Cannot find a kubeconfig: pass --kubeconfig, set KUBECONFIG, or run in a cluster");
}

/** Cluster access for `server` with a bearer `token` (plain http allowed; TLS not verified), for tests and tools. */
export function kubeConfigFor(server: string, token?: string): KubeAccess {
  return new SimpleKubeConfig({ server, insecure: true }, token === undefined ? {} : { token });
}

/** A kubeconfig file's current context. */
export function kubeConfigFromFile(path: string): KubeAccess {
  let doc: unknown;
  try {
    doc = parseYaml(readFileSync(path, "utf8"));
  } catch (err) {
    throw new Error(`kubeconfig ${path}: ${(err as Error).message}`, { cause: err });
  }
  return fromDocument(doc, path);
}

function inClusterConfig(env: Record<string, string | undefined>): KubeAccess {
  const host = env.KUBERNETES_SERVICE_HOST ?? "";
  const port = env.KUBERNETES_SERVICE_PORT ?? "443";
  return new SimpleKubeConfig(
    {
      server: `https://${host.includes(":") ? `[${host}]` : host}:${port}`,
      caFile: join(SERVICE_ACCOUNT_DIR, "ca.crt"),
    },
    { tokenFile: join(SERVICE_ACCOUNT_DIR, "token") },
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

/** The entry `name` of a kubeconfig list (`clusters`, `users`, `contexts`): its inner object under `key`. */
function named(doc: Doc, list: string, key: string, name: string | undefined, path: string): Doc {
  const entries = Array.isArray(doc[list]) ? (doc[list] as unknown[]) : [];
  const hit = entries.find((e) => isDoc(e) && e.name === name);
  if (!isDoc(hit) || !isDoc(hit[key])) throw new Error(`kubeconfig ${path}: no ${key} named "${String(name)}"`);
  return hit[key];
}

function fromDocument(doc: unknown, path: string): KubeAccess {
  if (!isDoc(doc)) throw new Error(`kubeconfig ${path}: not a kubeconfig document`);
  const contextName = str(doc, "current-context");
  if (!contextName) throw new Error(`kubeconfig ${path}: no current-context`);
  const context = named(doc, "contexts", "context", contextName, path);
  const c = named(doc, "clusters", "cluster", str(context, "cluster"), path);
  const userName = str(context, "user");
  const u = userName ? named(doc, "users", "user", userName, path) : {};
  const server = str(c, "server");
  if (!server) throw new Error(`kubeconfig ${path}: cluster "${String(str(context, "cluster"))}" has no server`);
  const rel = (f: string | undefined): string | undefined =>
    f === undefined || isAbsolute(f) ? f : join(dirname(path), f);
  const cluster: ClusterEntry = {
    server,
    caData: str(c, "certificate-authority-data"),
    caFile: rel(str(c, "certificate-authority")),
    insecure: c["insecure-skip-tls-verify"] === true,
    serverName: str(c, "tls-server-name"),
    proxyUrl: str(c, "proxy-url"),
  };
  const user: UserEntry = {
    token: str(u, "token"),
    tokenFile: rel(str(u, "tokenFile")),
    certData: str(u, "client-certificate-data"),
    certFile: rel(str(u, "client-certificate")),
    keyData: str(u, "client-key-data"),
    keyFile: rel(str(u, "client-key")),
    username: str(u, "username"),
    password: str(u, "password"),
    plugin: u.exec !== undefined || u["auth-provider"] !== undefined,
  };
  return new SimpleKubeConfig(cluster, user, path);
}

const b64 = (s: string): Buffer => Buffer.from(s, "base64");

/** The common configurations, read here; plugins and proxies through client-node, loaded at first use. */
class SimpleKubeConfig implements KubeAccess {
  readonly #cluster: ClusterEntry;
  readonly #user: UserEntry;
  readonly #path: string | undefined;
  #delegate: Promise<KubeAccess> | undefined;

  constructor(cluster: ClusterEntry, user: UserEntry, path?: string) {
    this.#cluster = cluster;
    this.#user = user;
    this.#path = path;
  }

  getCurrentCluster(): { server: string; proxyUrl?: string } {
    const { server, proxyUrl } = this.#cluster;
    return proxyUrl ? { server, proxyUrl } : { server };
  }

  async applyToHTTPSOptions(opts: HttpsRequestOptions): Promise<void> {
    if ((this.#user.plugin || this.#cluster.proxyUrl) && this.#path) {
      this.#delegate ??= clientNodeKubeConfig(this.#path);
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

/** client-node's KubeConfig for `path` (exec and auth-provider plugins, proxies). */
async function clientNodeKubeConfig(path: string): Promise<KubeAccess> {
  const { KubeConfig } = await import("@kubernetes/client-node");
  const kc = new KubeConfig();
  kc.loadFromFile(path);
  return kc;
}
