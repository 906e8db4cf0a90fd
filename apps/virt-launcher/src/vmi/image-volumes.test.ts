import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { VirtualMachineInstance } from "@kvt/api";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ImageNotFoundError, imageStoreResolver } from "./image-store.ts";
import { mountedImageDirs, podImageResolver } from "./image-volumes.ts";

function vmiWith(volumes: unknown[], kernelBootImage?: string): VirtualMachineInstance {
  return {
    apiVersion: "kubevirt.io/v1",
    kind: "VirtualMachineInstance",
    metadata: { name: "v", namespace: "default", uid: "u1" },
    spec: {
      domain: {
        devices: {},
        ...(kernelBootImage ? { firmware: { kernelBoot: { container: { image: kernelBootImage } } } } : {}),
      },
      volumes,
    },
  } as unknown as VirtualMachineInstance;
}

describe("podImageResolver()", () => {
  let tmp: string;
  beforeEach(() => {
    tmp = mkdtempSync(join(tmpdir(), "kvt-image-volumes-"));
  });
  afterEach(() => rmSync(tmp, { recursive: true, force: true }));

  /** An image as the kubelet mounts a kubevirt-ts OCI containerDisk: /image.json with paths relative to its root. */
  function ociImage(name: string, manifest: Record<string, unknown>): string {
    const root = join(tmp, name);
    mkdirSync(join(root, "boot"), { recursive: true });
    mkdirSync(join(root, "disk"), { recursive: true });
    writeFileSync(join(root, "boot/vmlinuz"), "kernel");
    writeFileSync(join(root, "disk/root.img"), "disk");
    writeFileSync(join(root, "image.json"), JSON.stringify({ schemaVersion: 1, ...manifest }));
    return root;
  }

  it("reads a mounted OCI containerDisk's image.json and files through the pod's mounts", () => {
    const root = ociImage("oci", {
      kernel: "boot/vmlinuz",
      disk: "disk/root.img",
      cmdline: "console=ttyS0",
      pvmSafe: true,
      minMemoryBytes: 128,
    });
    const vmi = vmiWith([{ name: "rootdisk", containerDisk: { image: "local/demo-linux:latest" } }]);
    const mounts = [{ mountPath: "/var/run/kubevirt/image-volumes/rootdisk", hostPath: root, readOnly: true }];
    const failing = (ref: string): never => {
      throw new ImageNotFoundError(`no store: ${ref}`);
    };
    const image = podImageResolver(vmi, mounts, failing)("local/demo-linux:latest");
    expect(image).toEqual({
      ref: "local/demo-linux:latest",
      dir: root,
      kernelPath: join(root, "boot/vmlinuz"),
      diskPath: join(root, "disk/root.img"),
      cmdline: "console=ttyS0",
      pvmSafe: true,
      minMemoryBytes: 128,
    });
    // Any other reference goes to the fallback (the local store).
    expect(() => podImageResolver(vmi, mounts, failing)("local/other:latest")).toThrow(/no store: local\/other/);
  });

  it("maps kernelBoot's image to kernel-boot-volume, and refuses paths leaving the image", () => {
    const root = ociImage("kb", { kernel: "boot/vmlinuz", cmdline: "" });
    const vmi = vmiWith([], "example/kernel:1");
    const mounts = [{ mountPath: "/var/run/kubevirt/image-volumes/kernel-boot-volume", hostPath: root }];
    expect(mountedImageDirs(vmi, mounts)).toEqual(new Map([["example/kernel:1", root]]));
    writeFileSync(join(root, "image.json"), JSON.stringify({ schemaVersion: 1, kernel: "boot/../../etc/passwd" }));
    expect(() => podImageResolver(vmi, mounts, imageStoreResolver(tmp))("example/kernel:1")).toThrow(
      /not a version 1 manifest with a kernel/,
    );
  });

  it("says so when a mounted image carries no image.json (a plain KubeVirt containerDisk)", () => {
    const root = join(tmp, "plain");
    mkdirSync(join(root, "disk"), { recursive: true });
    const vmi = vmiWith([{ name: "d", containerDisk: { image: "quay.io/containerdisks/fedora:41" } }]);
    const mounts = [{ mountPath: "/var/run/kubevirt/image-volumes/d", hostPath: root }];
    expect(() => podImageResolver(vmi, mounts, imageStoreResolver(tmp))("quay.io/containerdisks/fedora:41")).toThrow(
      /has no image.json in .*plain \(a kubevirt-ts containerDisk carries one at its root\)/,
    );
  });

  it("falls back to the store when the volume is not mounted (a pod from before image volumes)", () => {
    const store = join(tmp, "store");
    const dir = join(store, "local", "test-guest", "latest");
    mkdirSync(dir, { recursive: true });
    writeFileSync(
      join(dir, "image.json"),
      JSON.stringify({ schemaVersion: 1, kernel: "test-guest.elf", pvmSafe: true }),
    );
    const vmi = vmiWith([{ name: "containerdisk", containerDisk: { image: "local/test-guest:latest" } }]);
    // Under the process-kubelet a path no mount maps stays a container path, absent on the host.
    const mounts = [{ mountPath: "/var/run/kubevirt/sockets", hostPath: join(tmp, "sockets") }];
    expect(mountedImageDirs(vmi, mounts).size).toBe(0);
    expect(podImageResolver(vmi, mounts, imageStoreResolver(store))("local/test-guest:latest").kernelPath).toBe(
      join(dir, "test-guest.elf"),
    );
  });
});
