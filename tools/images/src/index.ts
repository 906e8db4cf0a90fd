/** @kvt/images: builds the local container-disk images (local/demo-linux from Debian packages, local/test-guest) into the local image store. */

/** The newc cpio writer and reader used for the initramfs. */
export { type CpioEntry, listCpio, writeCpio } from "./cpio.ts";
/** Errors from the Debian tools, carrying the command that fixes them; one package's candidate, .deb and files. */
export { DebianToolError, downloadPackage, extractPackage, resolvePackage, resolvePackages } from "./debian.ts";
/** Build `local/debian-cloud:latest` (Debian 12 on a raw ext4 disk, cloud-init NoCloud; skipped when current). */
export {
  buildDebianCloud,
  DEBIAN_CLOUD_BOOT_MARKER,
  DEBIAN_CLOUD_CMDLINE,
  DEBIAN_CLOUD_DISK_BYTES,
  DEBIAN_CLOUD_IMAGE,
  DEBIAN_CLOUD_MIN_MEMORY_BYTES,
  type DebianCloudOptions,
  type DebianCloudResult,
} from "./debian-cloud.ts";
/** Build `local/demo-linux:latest` from Debian packages (skipped when current), and its constants. */
export {
  type BuildOptions,
  type BuildResult,
  buildDemoLinux,
  DEMO_BOOT_MARKER,
  DEMO_CMDLINE,
  DEMO_LINUX_IMAGE,
  DEMO_MIN_MEMORY_BYTES,
  DEMO_MODULES,
} from "./demo-linux.ts";
/** The Debian programs the image tools and the local cluster need, their apt-get installer (root), and `run`. */
export {
  BUILD_TOOLS,
  ensureHostTools,
  type HostTool,
  HostToolError,
  PUSH_TOOLS,
  type RunOptions,
  run,
  TEST_TOOLS,
} from "./host-tools.ts";
/**
 * The machine's cache of deterministic build outputs (guest images here, the Kubernetes binaries in tools/kube, the
 * nested lane's initramfs), which fresh clones of the project share.
 */
export {
  type MachineCache,
  type MachineCacheOptions,
  machineCache,
  machineCacheKey,
  machineCacheRoot,
} from "./machine-cache.ts";
/** The store layout: root, reference parsing, manifests. */
export {
  defaultStoreRoot,
  type ImageManifest,
  type ImageRef,
  imageDir,
  isCurrent,
  parseImageRef,
  readManifest,
} from "./store.ts";
/** Register the native test guest ELF as `local/test-guest:latest`. */
export { registerTestGuest, TEST_GUEST_IMAGE } from "./test-guest.ts";
