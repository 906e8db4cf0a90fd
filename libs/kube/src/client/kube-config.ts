/**
 * Loading a KubeConfig (client-node's): from an explicit file, from `$KUBECONFIG`, from `~/.kube/config`, or the
 * in-cluster service account, in that order.
 */
import { existsSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { KubeConfig } from "@kubernetes/client-node";

/** Where {@link loadKubeConfig} looks. `env` defaults to `process.env` (read at call time, never at import). */
export interface KubeConfigSource {
  /** A kubeconfig path (the `--kubeconfig` flag). Wins over everything else. */
  readonly kubeconfig?: string;
  /** Environment to read `KUBECONFIG` / `KUBERNETES_SERVICE_HOST` from. */
  readonly env?: Record<string, string | undefined>;
}

/** Loads a KubeConfig; throws with a clear message when nothing is configured. */
export function loadKubeConfig(source: KubeConfigSource = {}): KubeConfig {
  const env = source.env ?? process.env;
  const kc = new KubeConfig();
  const file = source.kubeconfig ?? env.KUBECONFIG?.split(":")[0];
  if (file) {
    kc.loadFromFile(file);
    return kc;
  }
  if (env.KUBERNETES_SERVICE_HOST) {
    kc.loadFromCluster();
    return kc;
  }
  const home = join(env.HOME ?? homedir(), ".kube", "config");
  if (existsSync(home)) {
    kc.loadFromFile(home);
    return kc;
  }
  throw new Error("Cannot find a kubeconfig: pass --kubeconfig, set KUBECONFIG, or run in a cluster");
}

/** A KubeConfig for `server` with a bearer `token` (plain http allowed), for tests and tools. */
export function kubeConfigFor(server: string, token?: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: "c", server, skipTLSVerify: true }],
    users: [{ name: "u", token }],
    contexts: [{ name: "ctx", cluster: "c", user: "u" }],
    currentContext: "ctx",
  });
  return kc;
}
