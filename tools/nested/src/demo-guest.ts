/**
 * The demo guest as the nested jobs boot it on our VMM: the demo image's kernel and initramfs, a NoCloud seed as
 * an extra initramfs segment, 1 vCPU and 256 MiB unless told otherwise, the console fed to a GuestConsole.
 */
import { join } from "node:path";
import { DEMO_LINUX_IMAGE, defaultStoreRoot, imageDir } from "@kvt/images";
import { noCloudSeedInitrd, type ShutdownEvent, Vm } from "@kvt/vmm";
import { GuestConsole } from "./guest-console.ts";

/** The line the seed's user data prints (the vm-cirros example's script prints the same text). */
export const CLOUD_INIT_LINE = "printed from cloud-init userdata";

/** A booted demo guest: its VM, console and the shutdown it ends with. */
export interface DemoGuest {
  readonly vm: Vm;
  readonly console: GuestConsole;
  readonly shutdown: Promise<ShutdownEvent>;
}

/** Boots the demo image on our VMM (1 vCPU unless told otherwise), with `userData` as a NoCloud seed. */
export function bootDemo(options: { userData?: string; memoryBytes?: number; vcpus?: number } = {}): DemoGuest {
  const dir = imageDir(defaultStoreRoot(), DEMO_LINUX_IMAGE);
  const console = new GuestConsole();
  const seed = noCloudSeedInitrd({
    metaData: "instance-id: nested.demo\nlocal-hostname: demo\n",
    ...(options.userData !== undefined ? { userData: options.userData } : {}),
  });
  const vm = Vm.create({
    memoryBytes: options.memoryBytes ?? 256 * 2 ** 20,
    vcpus: options.vcpus ?? 1,
    boot: {
      kind: "linux",
      kernelPath: join(dir, "vmlinuz"),
      initrdPath: join(dir, "initrd.img"),
      extraInitrd: [seed],
      cmdline: "console=ttyS0 quiet panic=-1",
    },
  });
  vm.on("serial-output", (chunk) => console.feed(chunk));
  const shutdown = new Promise<ShutdownEvent>((resolve) => vm.on("shutdown", resolve));
  vm.start();
  return { vm, console, shutdown };
}
