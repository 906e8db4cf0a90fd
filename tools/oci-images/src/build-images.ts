/**
 * `buildImages()`: every release image into one OCI layout, skipping each image whose inputs have not changed.
 *
 * ```
 * <work>/                     default <project>/.data/oci-images (git-ignored), or $KVT_OCI_IMAGES_DIR
 *   cache/debian-<key>/       the unpacked Debian packages (debian-root.ts)
 *   stage/<layer>/            each layer's tree, rebuilt every run (cheap), digested to decide what to rebuild
 *   bundles/<app>/            each app's bundle
 *   layout/                   the OCI layout: one tag per image (virt-api, ..., demo-linux, test-guest) and per stage
 * ```
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import {
  buildDemoLinux,
  DEMO_LINUX_IMAGE,
  defaultStoreRoot,
  type ImageManifest,
  imageDir,
  readManifest,
  registerTestGuest,
  TEST_GUEST_IMAGE,
} from "@kvt/images";
import { addonPath } from "@kvt/native";
import { type AppBundle, bundleApp } from "./app-bundle.ts";
import { debianRoot } from "./debian-root.ts";
import { BUILD_TOOLS, ensureHostTools } from "./host-tools.ts";
import { LayerDir } from "./layer-dir.ts";
import {
  NODE_PATH,
  stageApp,
  stageBase,
  stageCommand,
  stageContainerDisk,
  stageNetTools,
  stageQemu,
} from "./layers.ts";
import { type ImageConfig, OciLayout } from "./oci-layout.ts";
import {
  type ComponentImage,
  IMAGES,
  type ImageCommand,
  keyOf,
  PROJECT_ROOT,
  projectVersion,
} from "./release-images.ts";

/** Options of {@link buildImages}. */
export interface BuildImagesOptions {
  /** Working directory (cache, stages, layout); default `<project>/.data/oci-images` or `$KVT_OCI_IMAGES_DIR`. */
  readonly workDir?: string;
  /** Unpack the Debian packages again (picks up new security fixes). */
  readonly refreshDebian?: boolean;
  /** Progress lines. */
  readonly log?: (line: string) => void;
}

/** One built image. */
export interface BuiltImage {
  /** Tag in the layout, e.g. `virt-api`. */
  readonly tag: string;
  /** Repository and tag it is pushed as, without the registry, e.g. `kubevirt-ts/virt-api:0.1.0`. */
  readonly reference: string;
  readonly manifestDigest: string;
  /** Sum of the layers' compressed sizes (what a pull downloads). */
  readonly compressedBytes: number;
  /** Sum of the layers' file bytes (the unpacked size). */
  readonly uncompressedBytes: number;
  /** True when the layout already held it, built from the same inputs. */
  readonly skipped: boolean;
}

/** What {@link buildImages} made. */
export interface BuildImagesResult {
  readonly layout: OciLayout;
  readonly images: readonly BuiltImage[];
}

/** The default working directory. */
export function defaultWorkDir(): string {
  return process.env.KVT_OCI_IMAGES_DIR ?? join(PROJECT_ROOT, ".data/oci-images");
}

interface Stage {
  readonly tag: string;
  readonly key: string;
  readonly bytes: number;
}

/** Builds `tag` = `parent` + the tree of `layer`, unless it is current; returns its key and cumulative size. */
async function layerStage(
  layout: OciLayout,
  parent: Stage | undefined,
  tag: string,
  layer: LayerDir,
  config?: ImageConfig,
): Promise<Stage & { skipped: boolean }> {
  const { digest, bytes } = layer.seal();
  const key = keyOf(parent?.key ?? "scratch", digest, JSON.stringify(config ?? null));
  const total = (parent?.bytes ?? 0) + bytes;
  if (layout.isCurrent(tag, key)) return { tag, key, bytes: total, skipped: true };
  let from = parent?.tag;
  if (!from) {
    from = `${tag}-scratch`;
    await layout.newImage(from);
  }
  await layout.addLayer(from, tag, layer.dir, `${tag} layer`);
  if (config) await layout.configure(tag, config);
  layout.markBuilt(tag, key);
  return { tag, key, bytes: total, skipped: false };
}

/** A containerDisk image (tools/images' store entry `dir`, manifest `m`) as layout tag `tag`: one layer, no parent. */
async function containerDiskStage(
  layout: OciLayout,
  work: string,
  tag: string,
  dir: string,
  m: ImageManifest,
): Promise<Stage & { skipped: boolean }> {
  const layer = new LayerDir(join(work, "stage", tag));
  stageContainerDisk(layer, dir, m);
  const config: ImageConfig = {
    labels: {
      "org.opencontainers.image.title": m.image,
      "io.kubevirt-ts.kernel-cmdline": m.cmdline,
      "io.kubevirt-ts.sources": m.sources.map((s) => `${s.name}=${s.version}`).join(","),
    },
  };
  return await layerStage(layout, undefined, tag, layer, config);
}

/**
 * The test guest's store entry: registered from native/'s build when it has made the ELF (the same step tools/images'
 * CLI takes), else the store's copy; undefined when neither exists.
 */
function testGuest(): { dir: string; manifest: ImageManifest } | undefined {
  const elf = join(PROJECT_ROOT, "native/build/guest/kvt-test-guest.elf");
  if (existsSync(elf)) return registerTestGuest(elf);
  const manifest = readManifest(defaultStoreRoot(), TEST_GUEST_IMAGE);
  return manifest ? { dir: imageDir(defaultStoreRoot(), TEST_GUEST_IMAGE), manifest } : undefined;
}

/** The bundle of a command's own entry point (`apps/<app>/src/<source>.ts`). */
async function commandBundle(app: string, command: ImageCommand, work: string): Promise<AppBundle> {
  return await bundleApp(PROJECT_ROOT, app, join(work, "bundles", command.name), command);
}

function appConfig(image: ComponentImage, entry: string): ImageConfig {
  return {
    entrypoint: [NODE_PATH, entry],
    env: ["PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
    user: image.user,
    workingDir: "/",
    labels: {
      "org.opencontainers.image.title": image.tag,
      "org.opencontainers.image.description": image.description,
      "org.opencontainers.image.version": projectVersion(),
    },
  };
}

/** Builds every image of {@link IMAGES} (and the containerDisks local/demo-linux, local/test-guest) into the layout; see the module comment. */
export async function buildImages(options: BuildImagesOptions = {}): Promise<BuildImagesResult> {
  const log = options.log ?? ((): void => {});
  const work = options.workDir ?? defaultWorkDir();
  await ensureHostTools(BUILD_TOOLS, log);
  const tree = await debianRoot(join(work, "cache"), log, options.refreshDebian);
  const layout = new OciLayout(join(work, "layout"));
  await layout.init();
  const nodeBinary = process.execPath;
  const images: BuiltImage[] = [];
  const done = (stage: Stage & { skipped: boolean }, reference: string): void => {
    const info = layout.info(stage.tag);
    const image: BuiltImage = {
      ...info,
      tag: stage.tag,
      reference,
      uncompressedBytes: stage.bytes,
      skipped: stage.skipped,
    };
    images.push(image);
    log(`${stage.tag}: ${stage.skipped ? "current" : "built"}`);
  };

  log("staging the base layer (glibc, Node 24)");
  const baseDir = new LayerDir(join(work, "stage/base"));
  const baseLibs = await stageBase(tree, baseDir, nodeBinary, addonPath);
  const base = await layerStage(layout, undefined, "stage-base", baseDir);
  log("staging the QEMU layer (TCG)");
  const qemuDir = new LayerDir(join(work, "stage/qemu"));
  await stageQemu(tree, qemuDir, baseLibs);
  const qemu = await layerStage(layout, base, "stage-qemu", qemuDir);
  log("staging the network tools layer (nsenter, ip, bridge, nft)");
  const netToolsDir = new LayerDir(join(work, "stage/net-tools"));
  await stageNetTools(tree, netToolsDir, baseLibs);
  const netTools = await layerStage(layout, base, "stage-net-tools", netToolsDir);

  for (const image of IMAGES) {
    log(`bundling ${image.tag}`);
    const bundle = await bundleApp(PROJECT_ROOT, image.tag, join(work, "bundles", image.tag));
    const appDir = new LayerDir(join(work, "stage", image.tag));
    await stageApp(appDir, image.tag, bundle, addonPath);
    for (const command of image.commands) {
      const own = command.source === "main" ? bundle : await commandBundle(image.tag, command, work);
      stageCommand(appDir, command.path, own.entry);
      if (own !== bundle) await stageApp(appDir, command.name, own, addonPath);
    }
    const parent = image.qemu ? qemu : image.netTools ? netTools : base;
    done(await layerStage(layout, parent, image.tag, appDir, appConfig(image, bundle.entry)), image.reference);
  }

  log(`building ${DEMO_LINUX_IMAGE} (tools/images)`);
  const demo = await buildDemoLinux({ log: (line) => log(`  ${line}`) });
  done(await containerDiskStage(layout, work, "demo-linux", demo.dir, demo.manifest), DEMO_LINUX_IMAGE);
  const guest = testGuest();
  if (guest) done(await containerDiskStage(layout, work, "test-guest", guest.dir, guest.manifest), TEST_GUEST_IMAGE);
  else log(`${TEST_GUEST_IMAGE}: not built (no native/build/guest/kvt-test-guest.elf and none in the store); skipped`);
  await layout.gc();
  return { layout, images };
}
