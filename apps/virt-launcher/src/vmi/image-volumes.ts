/**
 * The images of a VMI as its pod mounts them (docs/decisions/0018-containerdisk-image-volumes.md): virt-controller
 * renders each containerDisk volume, and `firmware.kernelBoot.container`, as a pod image volume mounted read-only at
 * `IMAGE_VOLUMES_DIR/<volume>` (KERNEL_BOOT_VOLUME for kernelBoot). On a real node the kubelet mounts the image's
 * files there; under the process-kubelet, KVT_VOLUME_MOUNTS maps the path to the image's directory in the local
 * store. Either way the directory holds the image's `image.json` (image-store.ts) and the files it names.
 *
 * A reference whose volume is not mounted (a launcher run by hand, a pod rendered before image volumes) resolves
 * through the local image store, as before.
 */
import { existsSync } from "node:fs";
import { imageVolumePath, KERNEL_BOOT_VOLUME, type VirtualMachineInstance } from "@kvt/api";
import { hostPathOf, type VolumeMount } from "./disks.ts";
import { type ImageResolver, readImageDir } from "./image-store.ts";

/** The directory each of `vmi`'s image references is mounted at in this pod, when it is. */
export function mountedImageDirs(vmi: VirtualMachineInstance, mounts: readonly VolumeMount[]): Map<string, string> {
  const byRef = new Map<string, string>();
  const add = (ref: string | undefined, volume: string): void => {
    if (!ref || byRef.has(ref)) return;
    const dir = hostPathOf(imageVolumePath(volume), mounts);
    if (existsSync(dir)) byRef.set(ref, dir);
  };
  add(vmi.spec?.domain?.firmware?.kernelBoot?.container?.image, KERNEL_BOOT_VOLUME);
  for (const v of vmi.spec?.volumes ?? []) add(v.containerDisk?.image, v.name);
  return byRef;
}

/** Resolves `vmi`'s images from their pod image volumes, any other reference through `fallback` (the store). */
export function podImageResolver(
  vmi: VirtualMachineInstance,
  mounts: readonly VolumeMount[],
  fallback: ImageResolver,
): ImageResolver {
  const dirs = mountedImageDirs(vmi, mounts);
  return (ref) => {
    const dir = dirs.get(ref);
    return dir === undefined ? fallback(ref) : readImageDir(dir, ref);
  };
}
