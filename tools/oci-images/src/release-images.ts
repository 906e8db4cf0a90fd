/** The release's component images: their names, users and what each carries, and the project facts they need. */
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";

/** The checkout's root folder (ends with `/`). */
export const PROJECT_ROOT: string = new URL("../../../", import.meta.url).pathname;

/** One component image. */
export interface ComponentImage {
  /** The app folder under apps/, and the image's tag in the layout. */
  readonly tag: string;
  /** Repository and tag without the registry, e.g. `kubevirt-ts/virt-api:0.1.0`. */
  readonly reference: string;
  /** The user the entrypoint runs as (numeric, so no lookup is needed). */
  readonly user: string;
  /** Whether the image carries QEMU (the launcher's software-emulation backend). */
  readonly qemu: boolean;
  /** Whether the image carries nsenter, ip and nft (virt-handler plumbs launcher pods' networks with them). */
  readonly netTools?: boolean;
  /**
   * Commands the pods that run this image name (not its entrypoint): an executable at `path` that runs the app's
   * `apps/<tag>/src/<source>.ts`, bundled as `<name>`. virt-controller renders the launcher pod's containers with
   * KubeVirt's commands, /usr/bin/virt-launcher-monitor and /usr/bin/virt-tail.
   */
  readonly commands: readonly ImageCommand[];
  readonly description: string;
}

/** The project's version (root package.json): the images' tag. */
export function projectVersion(): string {
  const pkg = JSON.parse(readFileSync(`${PROJECT_ROOT}package.json`, "utf8")) as { version: string };
  return pkg.version;
}

/** The repository the component images are pushed under. */
export const REPOSITORY_PREFIX = "kubevirt-ts";

/** An executable of an image that runs one of the app's entry points. */
export interface ImageCommand {
  readonly path: string;
  readonly source: string;
  readonly name: string;
}

function component(
  tag: string,
  user: string,
  qemu: boolean,
  description: string,
  commands: readonly ImageCommand[] = [],
): ComponentImage {
  return { tag, reference: `${REPOSITORY_PREFIX}/${tag}:${projectVersion()}`, user, qemu, description, commands };
}

/** The launcher pod's commands (apps/virt-controller pod-template.ts LAUNCHER_COMMAND, VIRT_TAIL_COMMAND). */
const LAUNCHER_COMMANDS: readonly ImageCommand[] = [
  { path: "/usr/bin/virt-launcher-monitor", source: "main", name: "virt-launcher" },
  { path: "/usr/bin/virt-tail", source: "virt-tail", name: "virt-tail" },
];

/**
 * The component images. Users as KubeVirt runs them: virt-api and virt-controller as an unprivileged user,
 * virt-handler as root (a node agent: host mounts, device plugins, launchers' namespaces), virt-launcher as KubeVirt's
 * non-root qemu user 107.
 */
export const IMAGES: readonly ComponentImage[] = [
  component("virt-api", "1001", false, "KubeVirt-compatible admission webhooks and subresources"),
  component("virt-controller", "1001", false, "KubeVirt-compatible cluster controllers"),
  { ...component("virt-handler", "0", false, "KubeVirt-compatible node agent"), netTools: true },
  component(
    "virt-launcher",
    "107",
    true,
    "KubeVirt-compatible per-VMI launcher: native VMM, QEMU TCG fallback",
    LAUNCHER_COMMANDS,
  ),
];

/** A cache key over `parts`. */
export function keyOf(...parts: readonly string[]): string {
  return createHash("sha256").update(JSON.stringify(parts)).digest("hex");
}
