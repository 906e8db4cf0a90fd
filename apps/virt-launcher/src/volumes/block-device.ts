/**
 * Raw block devices as disks (a Block claim's device, KubeVirt's `type='block'` source): the launcher never creates,
 * sizes or reads them through a file format (the backends open the device itself: our VMM asks BLKGETSIZE64, QEMU
 * uses host_device); the size, where the launcher needs it (a write layer over the device), is @kvt/vmm's
 * blockDeviceBytes.
 */
import { statSync } from "node:fs";

/** True when `path` is (or links to) a block device. */
export function isBlockDevice(path: string): boolean {
  try {
    return statSync(path).isBlockDevice();
  } catch {
    return false;
  }
}
