/**
 * The cluster's image registry: Debian's docker-registry (the CNCF distribution registry) on the bridge address,
 * storage under `<cluster-dir>/registry`, over TLS with the cluster CA's `registry-server` certificate, and only for
 * clients presenting a certificate of that CA (`registry-client`): the host pushes with it (skopeo
 * --dest-cert-dir) and the nodes' containerd pulls with it (node-config.ts's hosts.toml). Nothing outside this
 * machine reaches the bridge in any case (node-network.ts).
 */
import { join } from "node:path";
import type { HostTool } from "@kvt/images";
import type { ControlPlaneLayout } from "./control-plane.ts";

/** What running the registry needs. */
export const REGISTRY_TOOLS: readonly HostTool[] = [{ bin: "docker-registry", pkg: "docker-registry" }];

/** The registry's `HOST:PORT`. */
export function registryAddress(layout: Pick<ControlPlaneLayout, "hostIp" | "ports">): string {
  return `${layout.hostIp}:${layout.ports.registry}`;
}

/** The registry's files. */
export function registryPaths(dir: string) {
  return { config: join(dir, "registry", "config.yml"), storage: join(dir, "registry", "storage") };
}

/** docker-registry's config.yml (pure). */
export function registryConfig(layout: Pick<ControlPlaneLayout, "dir" | "hostIp" | "ports" | "pki">): string {
  return [
    "version: 0.1",
    "log:",
    "  level: warn",
    "storage:",
    "  filesystem:",
    `    rootdirectory: ${JSON.stringify(registryPaths(layout.dir).storage)}`,
    "  delete:",
    "    enabled: true",
    "http:",
    `  addr: ${registryAddress(layout)}`,
    "  tls:",
    `    certificate: ${JSON.stringify(registryServerCert(layout.pki.dir).cert)}`,
    `    key: ${JSON.stringify(registryServerCert(layout.pki.dir).key)}`,
    "    clientcas:",
    `      - ${JSON.stringify(layout.pki.ca.cert)}`,
    "",
  ].join("\n");
}

/** The registry's serving certificate in the pki directory (control-plane-pki.ts makes it). */
export function registryServerCert(pkiDir: string): { cert: string; key: string } {
  return { cert: join(pkiDir, "registry-server.crt"), key: join(pkiDir, "registry-server.key") };
}

/** The registry's client certificate in the pki directory, and the directory skopeo reads it from. */
export function registryClientCert(pkiDir: string): { cert: string; key: string; dir: string } {
  return {
    cert: join(pkiDir, "registry-client.crt"),
    key: join(pkiDir, "registry-client.key"),
    dir: join(pkiDir, "registry-client.d"),
  };
}

/** The registry's argv. */
export function registryArgs(layout: Pick<ControlPlaneLayout, "dir">): string[] {
  return ["docker-registry", "serve", registryPaths(layout.dir).config];
}
