/**
 * Who each local-cluster process is towards the API server. No component runs with the admin credentials:
 *
 *   scheduler          -> User system:kube-scheduler                      (bootstrap role system:kube-scheduler)
 *   service-proxy      -> User system:kube-proxy                          (bootstrap role system:node-proxier)
 *   kubelet/<node>     -> User system:node:<node>, Group system:nodes     (bootstrap role system:node)
 *   virt-api, virt-controller, virt-handler -> their KubeVirt ServiceAccount's token (the API server writes
 *                         kubeconfig-<account>; deploy/'s RBAC, see release-rbac.ts)
 *   kubectl, virtctl, tests -> the admin kubeconfig (system:masters)
 *
 * The scheduler's and kubelets' tokens are static tokens (kube-apiserver `--token-auth-file`), kept in the API
 * server's private data directory and stable across restarts; each gets a kubeconfig `kubeconfig-<name>` beside the
 * admin one (0600).
 */
import { randomBytes } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { parseTokenFile, renderTokenFile, type StaticToken } from "../apiserver/auth/token-file.ts";
import { writeKubeconfig } from "../apiserver/kubeconfig.ts";

/** A process identity authenticated by a static token. */
export interface ComponentIdentity {
  /** Kubeconfig file suffix: `kubeconfig-<file>`. */
  readonly file: string;
  readonly username: string;
  readonly groups: readonly string[];
}

/** The scheduler's identity, the service proxy's, then each node's kubelet's. */
export function componentIdentities(nodes: readonly string[]): ComponentIdentity[] {
  return [
    { file: "scheduler", username: "system:kube-scheduler", groups: [] },
    { file: "kube-proxy", username: "system:kube-proxy", groups: [] },
    ...nodes.map((n) => ({ file: `node-${n}`, username: `system:node:${n}`, groups: ["system:nodes"] })),
  ];
}

/** The kubeconfig of a component whose file suffix is `file` (beside the admin `kubeconfig`). */
export function componentKubeconfig(kubeconfig: string, file: string): string {
  return join(dirname(kubeconfig), `kubeconfig-${file}`);
}

/** The API server's token file in the cluster's data directory. */
export function tokenAuthFile(dataDir: string): string {
  return join(dataDir, "apiserver", "token-auth.csv");
}

/**
 * Writes `file` (0600) with a token per identity, keeping the tokens of identities it already has (kubeconfigs
 * written earlier stay valid); returns every identity's token.
 */
export function ensureComponentTokens(file: string, identities: readonly ComponentIdentity[]): StaticToken[] {
  const old = existsSync(file) ? parseTokenFile(readFileSync(file, "utf8"), file) : [];
  const out = identities.map((id): StaticToken => {
    const have = old.find((t) => t.username === id.username);
    return {
      token: have?.token ?? randomBytes(32).toString("hex"),
      username: id.username,
      uid: id.username,
      groups: [...id.groups],
    };
  });
  writeFileSync(file, renderTokenFile(out), { mode: 0o600 });
  return out;
}

/** Writes each identity's kubeconfig for the API server at `url` with CA `caCert`. */
export function writeComponentKubeconfigs(
  kubeconfig: string,
  url: string,
  caCert: string | undefined,
  identities: readonly ComponentIdentity[],
  tokens: readonly StaticToken[],
): void {
  for (const id of identities) {
    const t = tokens.find((x) => x.username === id.username);
    if (!t) throw new Error(`no token for ${id.username}`);
    writeKubeconfig(componentKubeconfig(kubeconfig, id.file), url, t.token, caCert);
  }
}
