/**
 * The cluster's image registry: Debian's docker-registry (the CNCF distribution registry) on the bridge address,
 * plain HTTP, storage under `<cluster-dir>/registry`. The host pushes to it (skopeo) and the nodes' containerd pull
 * from it (node-config.ts's hosts.toml); nothing outside this machine reaches the bridge (node-network.ts).
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
export function registryConfig(layout: Pick<ControlPlaneLayout, "dir" | "hostIp" | "ports">): string {
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
    "",
  ].join("\n");
}

/** The registry's argv. */
export function registryArgs(layout: Pick<ControlPlaneLayout, "dir">): string[] {
  return ["docker-registry", "serve", registryPaths(layout.dir).config];
}
