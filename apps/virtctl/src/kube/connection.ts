/**
 * Where virtctl connects, resolved like kubectl does: `--kubeconfig`, else `$KUBECONFIG` (a list of files, merged,
 * first wins), else `~/.kube/config`; `--context` picks the context (default: current-context); `-n/--namespace`
 * overrides the context's namespace, which defaults to `default`; `-s/--server` overrides the address. TLS
 * material and credentials (token, token file, client certificate, basic auth) come from the user entry; `exec`
 * and `auth-provider` users go through @kubernetes/client-node.
 */

import { readFileSync } from "node:fs";
import type { RequestOptions } from "node:http";
import type { ConnectionOrigin } from "./connection-error.ts";
import { type ClusterEntry, type MergedConfig, material, readKubeconfig, type UserEntry } from "./kubeconfig.ts";

/** The kubeconfig-related global flags. */
export interface ConnectionFlags {
  readonly kubeconfig?: string;
  readonly context?: string;
  readonly namespace?: string;
  /** `--server`/`-s`: overrides the cluster's address. */
  readonly server?: string;
}

/** A resolved connection: base URL, namespace, and a way to fill in TLS/auth for one request. */
export interface Connection {
  /** API server base URL, e.g. `https://127.0.0.1:6443`. */
  readonly server: URL;
  /** The namespace commands act in. */
  readonly namespace: string;
  /** The server, kubeconfig files and context, for error messages. */
  readonly origin: ConnectionOrigin;
  /** Adds TLS options and credential headers for the current user to `options`. */
  apply(options: RequestOptions & Record<string, unknown>): Promise<void>;
}

/** Thrown when no usable kubeconfig is found or it is inconsistent. */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ConfigError";
  }
}

function tlsOptions(cluster: ClusterEntry, user: UserEntry): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const ca = material(cluster["certificate-authority-data"], cluster["certificate-authority"]);
  if (ca) out.ca = ca;
  if (cluster["insecure-skip-tls-verify"]) out.rejectUnauthorized = false;
  if (cluster["tls-server-name"]) out.servername = cluster["tls-server-name"];
  const cert = material(user["client-certificate-data"], user["client-certificate"]);
  const key = material(user["client-key-data"], user["client-key"]);
  if (cert) out.cert = cert;
  if (key) out.key = key;
  return out;
}

function authHeader(user: UserEntry): string | undefined {
  if (user.token) return `Bearer ${user.token}`;
  if (user.tokenFile) return `Bearer ${readFileSync(user.tokenFile, "utf8").trim()}`;
  if (user.username !== undefined)
    return `Basic ${Buffer.from(`${user.username}:${user.password ?? ""}`).toString("base64")}`;
  return undefined;
}

/** For exec/auth-provider users: let @kubernetes/client-node produce the credentials. */
async function pluginApply(
  flags: ConnectionFlags,
  env: Readonly<Record<string, string | undefined>>,
  contextName: string,
  options: RequestOptions & Record<string, unknown>,
): Promise<void> {
  const [major = 0, minor = 0] = process.versions.node.split(".").map(Number);
  // @kubernetes/client-node's HTTP stack (undici) needs Node 22.19; the rest of virtctl runs on Node 20.
  if (!("Deno" in globalThis) && (major < 22 || (major === 22 && minor < 19))) {
    throw new ConfigError(
      `kubeconfig context "${contextName}" takes its credentials from an exec or auth-provider plugin, which virtctl supports on Node >= 22.19 only (this is Node ${process.versions.node}): upgrade Node, or use a context whose user has a token or client certificate`,
    );
  }
  const { KubeConfig } = await import("@kubernetes/client-node");
  const kc = new KubeConfig();
  if (flags.kubeconfig) kc.loadFromFile(flags.kubeconfig);
  else {
    const saved = process.env.KUBECONFIG;
    process.env.KUBECONFIG = env.KUBECONFIG ?? "";
    try {
      kc.loadFromDefault();
    } finally {
      if (saved === undefined) delete process.env.KUBECONFIG;
      else process.env.KUBECONFIG = saved;
    }
  }
  kc.setCurrentContext(contextName);
  await kc.applyToHTTPSOptions(options);
}

/** Loads the kubeconfig per `flags` and `env` (only `KUBECONFIG` and `HOME` are read). */
export function loadConnection(flags: ConnectionFlags, env: Readonly<Record<string, string | undefined>>): Connection {
  let config: MergedConfig | undefined;
  try {
    config = readKubeconfig(flags.kubeconfig, env);
  } catch (error) {
    throw new ConfigError(`invalid configuration: ${(error as Error).message}`);
  }
  if (!config && !flags.server) {
    throw new ConfigError(
      "no kubeconfig found: pass --kubeconfig FILE, set KUBECONFIG, or create ~/.kube/config (as kubectl would use)",
    );
  }
  const contextName = flags.context ?? config?.currentContext;
  const context = contextName ? config?.contexts.get(contextName) : undefined;
  if (flags.context && !context) throw new ConfigError(`context was not found for specified context: ${flags.context}`);
  const cluster = context ? config?.clusters.get(context.cluster) : undefined;
  if (context && !cluster && !flags.server) {
    throw new ConfigError(
      `invalid configuration: context "${contextName ?? ""}" names cluster "${context.cluster}", which does not exist`,
    );
  }
  const user = (context?.user ? config?.users.get(context.user) : undefined) ?? {};
  const server = flags.server ?? cluster?.server;
  if (!server) throw new ConfigError("invalid configuration: no server found for cluster");
  const usesPlugin = user.exec !== undefined || user["auth-provider"] !== undefined;
  const origin: ConnectionOrigin = {
    server: new URL(server).href.replace(/\/$/, ""),
    kubeconfigFiles: config?.files ?? [],
    ...(context && contextName ? { context: contextName } : {}),
  };
  return {
    server: new URL(server),
    origin,
    namespace: flags.namespace ?? context?.namespace ?? "default",
    apply: async (options) => {
      if (usesPlugin && contextName) return pluginApply(flags, env, contextName, options);
      Object.assign(options, tlsOptions(cluster ?? { server }, user));
      const auth = authHeader(user);
      if (auth) options.headers = { ...(options.headers as Record<string, string>), Authorization: auth };
    },
  };
}
