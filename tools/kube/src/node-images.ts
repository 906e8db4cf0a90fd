/**
 * The images the nodes need and cannot pull here, built on this machine into an OCI layout and pushed to the
 * cluster's registry by `up`:
 *
 *   kubevirt-ts/pause:<v>     the pod sandbox: pause/pause.c compiled with gcc -static (about 0.7 MB), /pause
 *   kubevirt-ts/busybox:<v>   Debian's busybox-static (its .deb through apt-get download) with every applet linked,
 *                             for test pods: sh, httpd, wget, nc, ... (and local-path's helper pods)
 *   kubevirt-ts/local-path-provisioner:<v>   the static binary `npm run kube -- build` made, alone (local-path.ts)
 *
 * ```
 * <data-dir>/node-images/
 *   debs/             the downloaded .debs (apt-get download)
 *   stage/<image>/    each layer's tree (rebuilt every run, cheap), digested to decide whether to rebuild
 *   layout/           the OCI layout (tags pause, busybox), built with the release images' tooling (@kvt/oci-images)
 * ```
 */
import { execFile } from "node:child_process";
import { symlinkSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { downloadPackage, ensureHostTools, extractPackage, type HostTool, resolvePackage } from "@kvt/images";
import { BUILD_TOOLS, type BuiltImage, LayerDir, OciLayout, pushImages } from "@kvt/oci-images";
import { binDir } from "./build.ts";
import { LOCAL_PATH_BINARY, LOCAL_PATH_IMAGE_REFERENCE } from "./local-path.ts";
import { LOCAL_PATH_VERSION } from "./versions.ts";

const exec = promisify(execFile);

/** The pause program's source. */
export const PAUSE_SOURCE = new URL("../pause/pause.c", import.meta.url).pathname;

/** The pause image's version: bump it when pause.c changes meaning. */
export const PAUSE_VERSION = "1.0";

/** The repository prefix of the node images in the registry (the release's images use the same). */
const REPOSITORY = "kubevirt-ts";

/** What building the pause program needs: gcc and glibc's static archive. */
export const PAUSE_TOOLS: readonly HostTool[] = [
  { bin: "gcc", pkg: "gcc" },
  { bin: "/usr/lib/x86_64-linux-gnu/libc.a", pkg: "libc6-dev" },
];

/** The node images as built: each one's tag in the layout and reference in the registry (without the registry). */
export interface NodeImages {
  readonly layout: OciLayout;
  readonly pause: BuiltImage;
  readonly busybox: BuiltImage;
  readonly localPath: BuiltImage;
}

/** The image references (without the registry) of the pause image and of busybox version `busyboxVersion`. */
export function nodeImageReferences(busyboxVersion: string): { pause: string; busybox: string } {
  // Debian versions carry an epoch and revision (1:1.35.0-4+deb12u1+b1): the tag is the upstream part.
  const upstream = busyboxVersion.replace(/^\d+:/, "").split("-")[0] ?? busyboxVersion;
  return { pause: `${REPOSITORY}/pause:${PAUSE_VERSION}`, busybox: `${REPOSITORY}/busybox:${upstream}` };
}

/** Tags `layer` (one layer, no parent) with `config` in `layout` as `tag`, unless current; pushed as `reference`. */
export async function tagImage(
  layout: OciLayout,
  tag: string,
  reference: string,
  layer: LayerDir,
  config: Parameters<OciLayout["configure"]>[1],
): Promise<BuiltImage> {
  const { digest, bytes } = layer.seal();
  const key = JSON.stringify([digest, config]);
  const skipped = layout.isCurrent(tag, key);
  if (!skipped) {
    await layout.newImage(`${tag}-scratch`);
    await layout.addLayer(`${tag}-scratch`, tag, layer.dir, `${tag} layer`);
    await layout.configure(tag, config);
    layout.markBuilt(tag, key);
  }
  return { ...layout.info(tag), tag, reference, uncompressedBytes: bytes, skipped };
}

/** Builds (or finds current) the pause, busybox and local-path-provisioner images in `<dataDir>/node-images/layout`. */
export async function buildNodeImages(dataDir: string, log: (line: string) => void): Promise<NodeImages> {
  await ensureHostTools([...BUILD_TOOLS, ...PAUSE_TOOLS], log);
  const work = join(dataDir, "node-images");
  const layout = new OciLayout(join(work, "layout"));
  await layout.init();

  const pauseDir = new LayerDir(join(work, "stage", "pause"));
  await exec("gcc", [
    "-static",
    "-Os",
    "-s",
    "-Wall",
    "-Wextra",
    "-Werror",
    "-o",
    pauseDir.host("/pause"),
    PAUSE_SOURCE,
  ]);
  const busyboxPkg = await resolvePackage("busybox-static");
  const refs = nodeImageReferences(busyboxPkg.version);
  const pause = await tagImage(layout, "pause", refs.pause, pauseDir, {
    entrypoint: ["/pause"],
    user: "65535",
    labels: { "org.opencontainers.image.title": "pause", "org.opencontainers.image.version": PAUSE_VERSION },
  });

  const deb = await downloadPackage(busyboxPkg, join(work, "debs"));
  const unpacked = join(work, "busybox-deb");
  await extractPackage(deb, unpacked);
  const busybox = join(unpacked, "bin", "busybox");
  const bbDir = new LayerDir(join(work, "stage", "busybox"));
  bbDir.copy(busybox, "/bin/busybox", 0o755);
  const { stdout } = await exec(busybox, ["--list-full"]);
  for (const applet of stdout.split("\n").filter((a) => a && a !== "bin/busybox")) {
    const depth = applet.split("/").length - 1;
    bbDir.mkdir(`/${applet.split("/").slice(0, -1).join("/")}`);
    symlinkSync(`${"../".repeat(depth)}bin/busybox`, bbDir.host(`/${applet}`));
  }
  bbDir.mkdir("/tmp", 0o1777);
  bbDir.write("/etc/passwd", "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n");
  bbDir.write("/etc/group", "root:x:0:\nnogroup:x:65534:\n");
  const bb = await tagImage(layout, "busybox", refs.busybox, bbDir, {
    env: ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"],
    labels: { "org.opencontainers.image.title": "busybox", "org.opencontainers.image.version": busyboxPkg.version },
  });

  const lpDir = new LayerDir(join(work, "stage", "local-path-provisioner"));
  lpDir.copy(join(binDir(dataDir), "local-path-provisioner"), LOCAL_PATH_BINARY, 0o755);
  lpDir.mkdir("/tmp", 0o1777);
  const localPath = await tagImage(layout, "local-path-provisioner", LOCAL_PATH_IMAGE_REFERENCE, lpDir, {
    entrypoint: [LOCAL_PATH_BINARY],
    labels: {
      "org.opencontainers.image.title": "local-path-provisioner",
      "org.opencontainers.image.version": LOCAL_PATH_VERSION,
    },
  });
  const state = (image: BuiltImage): string => (image.skipped ? "current" : "built");
  log(`node images: pause ${state(pause)}, busybox ${state(bb)}, local-path-provisioner ${state(localPath)}`);
  return { layout, pause, busybox: bb, localPath };
}

/**
 * Pushes the node images to `registry` (`HOST:PORT`) over TLS, with the CA and client certificate in `certDir`
 * (skopeo's --dest-cert-dir layout); returns the references pushed.
 */
export async function pushNodeImages(
  images: NodeImages,
  registry: string,
  certDir: string,
  workDir: string,
  log: (line: string) => void,
): Promise<string[]> {
  const options = { registry, insecure: false, certDir, workDir, log };
  return await pushImages(images.layout, [images.pause, images.busybox, images.localPath], options);
}
