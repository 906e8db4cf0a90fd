/**
 * The demo guest as the nested jobs boot it on our VMM: the demo image's kernel and initramfs, a NoCloud seed as
 * an extra initramfs segment, 1 vCPU and 256 MiB unless told otherwise, the console fed to a GuestConsole.
 */
import { join } from "node:path";
import { DEMO_LINUX_IMAGE, defaultStoreRoot, imageDir, readManifest } from "@kvt/images";
import { noCloudSeedInitrd, type ShutdownEvent, Vm, type VmDisk, type VmNic, type VmOptions } from "@kvt/vmm";
import { GuestConsole } from "./guest-console.ts";

/** The line the seed's user data prints (the vm-cirros example's script prints the same text). */
export const CLOUD_INIT_LINE = "printed from cloud-init userdata";

/** A booted demo guest: its VM, console and the shutdown it ends with. */
export interface DemoGuest {
  readonly vm: Vm;
  readonly console: GuestConsole;
  readonly shutdown: Promise<ShutdownEvent>;
}

/** How a demo guest is made: memory, vCPUs and the NoCloud user data. */
export interface DemoOptions {
  readonly userData?: string;
  readonly memoryBytes?: number;
  readonly vcpus?: number;
  /**
   * Which form of the image's kernel to boot: "uncompressed" (the ELF vmlinux, what the launcher's native backend
   * boots when the image has one; the default) or "bzImage" (the compressed kernel, which decompresses itself).
   */
  readonly kernel?: "uncompressed" | "bzImage";
  /** virtio-blk disks (/dev/vda, /dev/vdb, ... in the guest), as `boot.disks` of Vm.create. */
  readonly disks?: readonly VmDisk[];
  /** virtio-net NICs on L1 taps (eth0, ... in the guest), as `boot.nics` of Vm.create. */
  readonly nics?: readonly VmNic[];
}

/**
 * The Vm.create options of the demo image (1 vCPU, 256 MiB unless told otherwise). A migration target is created
 * from the same options, as the launcher does (its memory and vCPU state then arrive from the source).
 */
export function demoVmOptions(options: DemoOptions = {}): VmOptions {
  const dir = imageDir(defaultStoreRoot(), DEMO_LINUX_IMAGE);
  const manifest = readManifest(defaultStoreRoot(), DEMO_LINUX_IMAGE);
  const vmlinux = options.kernel !== "bzImage" ? manifest?.uncompressedKernel : undefined;
  const seed = noCloudSeedInitrd({
    metaData: "instance-id: nested.demo\nlocal-hostname: demo\n",
    ...(options.userData !== undefined ? { userData: options.userData } : {}),
  });
  return {
    memoryBytes: options.memoryBytes ?? 256 * 2 ** 20,
    vcpus: options.vcpus ?? 1,
    boot: {
      kind: "linux",
      kernelPath: join(dir, vmlinux ?? manifest?.kernel ?? "vmlinuz"),
      initrdPath: join(dir, "initrd.img"),
      extraInitrd: [seed],
      cmdline: "console=ttyS0 quiet panic=-1",
      ...(options.disks ? { disks: options.disks } : {}),
      ...(options.nics ? { nics: options.nics } : {}),
    },
  };
}

/** Boots the demo image on our VMM (1 vCPU unless told otherwise), with `userData` as a NoCloud seed. */
export function bootDemo(options: DemoOptions = {}): DemoGuest {
  const console = new GuestConsole();
  const vm = Vm.create(demoVmOptions(options));
  vm.on("serial-output", (chunk) => console.feed(chunk));
  const shutdown = new Promise<ShutdownEvent>((resolve) => vm.on("shutdown", resolve));
  vm.start();
  return { vm, console, shutdown };
}
