/**
 * The kubeconfig the server writes for kubectl, virtctl and client-node: a bearer token, and the server's CA (TLS),
 * or plain HTTP with insecure-skip-tls-verify when TLS is off (kubectl then sends no token, so only in-process
 * clients can use that mode).
 */
import { renameSync, writeFileSync } from "node:fs";
import { stringify } from "yaml";

/** Renders a kubeconfig for `server` and `token`. */
export function renderKubeconfig(server: string, token: string, caCert?: string, name = "kvt-local"): string {
  const cluster = caCert
    ? { server, "certificate-authority-data": Buffer.from(caCert).toString("base64") }
    : { server, "insecure-skip-tls-verify": true };
  return stringify({
    apiVersion: "v1",
    kind: "Config",
    clusters: [{ name, cluster }],
    users: [{ name: `${name}-admin`, user: { token } }],
    contexts: [{ name, context: { cluster: name, user: `${name}-admin`, namespace: "default" } }],
    "current-context": name,
    preferences: {},
  });
}

/** Writes the kubeconfig atomically (mode 0600), so readers never see half a file. */
export function writeKubeconfig(path: string, server: string, token: string, caCert?: string): void {
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, renderKubeconfig(server, token, caCert), { mode: 0o600 });
  renameSync(tmp, path);
}
