/**
 * Where virtctl connects, resolved like kubectl does: `--kubeconfig`, else `$KUBECONFIG` (a list of files, merged,
 * first wins), else `~/.kube/config`; `--context` picks the context; `-n/--namespace` overrides the context's
 * namespace, which defaults to `default`. TLS material and credentials come from the kubeconfig entry through
 * @kubernetes/client-node's `applyToHTTPSOptions`.
 */
import type { RequestOptions } from "node:http";
import { KubeConfig } from "@kubernetes/client-node";

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
  /** False when no kubeconfig was found and kubectl's fallback (`http://localhost:8080`) is in use. */
  readonly configured: boolean;
  /** The namespace commands act in. */
  readonly namespace: string;
  /** Adds TLS options and credential headers for the current user to `options`. */
  apply(options: RequestOptions & Record<string, unknown>): Promise<void>;
}

/** Thrown when no usable kubeconfig is found. */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ConfigError";
  }
}

/** Loads the kubeconfig per `flags` and `env` (only `KUBECONFIG` and `HOME` are read). */
export function loadConnection(flags: ConnectionFlags, env: Readonly<Record<string, string | undefined>>): Connection {
  const kc = new KubeConfig();
  const saved = { KUBECONFIG: process.env.KUBECONFIG, HOME: process.env.HOME };
  try {
    if (flags.kubeconfig) {
      kc.loadFromFile(flags.kubeconfig);
    } else {
      process.env.KUBECONFIG = env.KUBECONFIG ?? "";
      if (env.HOME !== undefined) process.env.HOME = env.HOME;
      kc.loadFromDefault();
    }
  } catch (error) {
    throw new ConfigError(`invalid configuration: ${(error as Error).message}`);
  } finally {
    restoreEnv(saved);
  }
  if (flags.context) {
    if (!kc.getContextObject(flags.context)) throw new ConfigError(`context "${flags.context}" does not exist`);
    kc.setCurrentContext(flags.context);
  }
  const cluster = kc.getCurrentCluster();
  if (!cluster?.server && !flags.server) {
    throw new ConfigError(
      "invalid configuration: no configuration has been provided, try setting KUBERNETES_MASTER environment variable",
    );
  }
  const context = kc.getContextObject(kc.getCurrentContext());
  return {
    server: new URL(flags.server ?? cluster?.server ?? ""),
    configured:
      flags.server !== undefined || !(cluster?.name === "cluster" && cluster.server === "http://localhost:8080"),
    namespace: flags.namespace ?? context?.namespace ?? "default",
    apply: async (options) => {
      await kc.applyToHTTPSOptions(options);
    },
  };
}

function restoreEnv(saved: { KUBECONFIG: string | undefined; HOME: string | undefined }): void {
  for (const [key, value] of Object.entries(saved)) {
    if (value === undefined) delete process.env[key];
    else process.env[key] = value;
  }
}
