/** @kvt/oci-images: the release's OCI images, built without a Docker daemon, and the tools to push and run them. */

/** Build every image into the OCI layout (unchanged ones skipped). */
export {
  type BuildImagesOptions,
  type BuildImagesResult,
  type BuiltImage,
  buildImages,
  defaultWorkDir,
} from "./build-images.ts";
/** Debian programs the build, push and tests need, installed with apt-get when root. */
export { BUILD_TOOLS, ensureHostTools, HostToolError, PUSH_TOOLS, TEST_TOOLS } from "./host-tools.ts";
/** A layer's file tree, staged before umoci packs it (reproducible: fixed times, digest of the tree). */
export { LayerDir } from "./layer-dir.ts";
/** A containerDisk image's layer from a tools/images store entry: /boot, /disk, /image.json (107:107). */
export { stageContainerDisk } from "./layers.ts";
/** A throwaway docker-registry on 127.0.0.1 (tests). */
export { type LocalRegistry, startLocalRegistry } from "./local-registry.ts";
/** The OCI layout (umoci). */
export { type ImageConfig, OciLayout } from "./oci-layout.ts";
/** Unpack an image into a runtime bundle and run it under crun or runc (tests). */
export { pickRuntime, prepareBundle, type RuntimeChoice, runContainer, unpackImage } from "./oci-runtime.ts";
/** Push to a registry and pull back (skopeo). */
export { type PushOptions, pullImage, pushImages } from "./push-images.ts";
/** The component images. */
export { type ComponentImage, IMAGES, projectVersion } from "./release-images.ts";
/** The size table and the KubeVirt figure it compares against. */
export { formatSizes, KUBEVIRT_LAUNCHER_REFERENCE_BYTES } from "./size-report.ts";
