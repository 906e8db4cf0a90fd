import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { VirtualMachineInstance } from "@kvt/api";
import { afterAll, describe, expect, it } from "vitest";
import { imageStoreResolver } from "./image-store.ts";
import { SpecError, toMachineSpec } from "./machine-spec.ts";

const store = mkdtempSync(join(tmpdir(), "kvt-store-"));
function storeImage(repo: string, tag: string, manifest: Record<string, unknown>): string {
  const dir = join(store, ...repo.split("/"), tag);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "image.json"), JSON.stringify({ schemaVersion: 1, ...manifest }));
  return dir;
}
const demoDir = storeImage("local/demo-linux", "latest", {
  kernel: "vmlinuz",
  uncompressedKernel: "vmlinux",
  initrd: "initrd.img",
  cmdline: "console=ttyS0 quiet",
  pvmSafe: false,
});
writeFileSync(join(demoDir, "vmlinux"), ""); // the resolver offers the uncompressed kernel only when it is there
const guestDir = storeImage("local/test-guest", "latest", { kernel: "test-guest.elf", cmdline: "", pvmSafe: true });
afterAll(() => rmSync(store, { recursive: true, force: true }));

const ctx = { resolveImage: imageStoreResolver(store), workDir: "/tmp/work" };

// The seed's vm-cirros template, with its containerDisk pointing at the demo image.
function cirros(): VirtualMachineInstance {
  return {
    apiVersion: "kubevirt.io/v1",
    kind: "VirtualMachineInstance",
    metadata: { name: "vm-cirros", namespace: "default" },
    spec: {
      domain: {
        devices: {
          disks: [
            { name: "containerdisk", disk: { bus: "virtio" } },
            { name: "cloudinitdisk", disk: { bus: "virtio" } },
          ],
        },
        resources: { requests: { memory: "64M" } },
        firmware: { uuid: "5d307ca9-b3ef-428c-8861-06e72d69f223" },
      },
      terminationGracePeriodSeconds: 0,
      volumes: [
        { name: "containerdisk", containerDisk: { image: "local/demo-linux:latest" } },
        {
          name: "cloudinitdisk",
          cloudInitNoCloud: {
            userDataBase64: "IyEvYmluL3NoCgplY2hvICdwcmludGVkIGZyb20gY2xvdWQtaW5pdCB1c2VyZGF0YScK",
          },
        },
      ],
    },
  };
}

describe("toMachineSpec", () => {
  it("maps the seed's vm-cirros VMI: demo image, 64M, one vCPU, decoded user data, firmware UUID", () => {
    const { disks, ...spec } = toMachineSpec(cirros(), ctx);
    expect(spec).toEqual({
      vmiKey: "default/vm-cirros",
      memoryBytes: 64_000_000 - (64_000_000 % 4096),
      vcpus: 1,
      boot: {
        kernelPath: join(demoDir, "vmlinuz"),
        uncompressedKernelPath: join(demoDir, "vmlinux"),
        initrdPath: join(demoDir, "initrd.img"),
        cmdline: "console=ttyS0 quiet",
        pvmSafe: false,
      },
      firmwareUuid: "5d307ca9-b3ef-428c-8861-06e72d69f223",
      workDir: "/tmp/work",
    });
    // The cloud-init volume is the guest's one disk: a read-only NoCloud ISO with the decoded user data.
    expect(disks?.map((d) => [d.name, d.kind, d.path, d.readOnly])).toEqual([
      ["cloudinitdisk", "cloudInitNoCloud", "/tmp/work/cloud-init/cloudinitdisk.iso", true],
    ]);
    const iso = Buffer.from(disks?.[0]?.contents ?? []).toString("latin1");
    expect(iso).toContain("cidata");
    expect(iso).toContain("echo 'printed from cloud-init userdata'");
    expect(iso).toContain('"instance-id":"5d307ca9-b3ef-428c-8861-06e72d69f223"');
    expect(iso).toContain('"local-hostname":"vm-cirros"');
  });

  it("raises guest memory to the image's minimum when the VMI asks for less", () => {
    storeImage("local/big-linux", "latest", {
      kernel: "vmlinuz",
      cmdline: "",
      pvmSafe: false,
      minMemoryBytes: 128 << 20,
    });
    const vmi = cirros();
    vmi.spec.volumes![0] = { name: "containerdisk", containerDisk: { image: "local/big-linux:latest" } };
    expect(toMachineSpec(vmi, ctx).memoryBytes).toBe(128 << 20);
    vmi.spec.domain.resources = { requests: { memory: "1Gi" } };
    expect(toMachineSpec(vmi, ctx).memoryBytes).toBe(1 << 30);
  });

  it("kernelBoot takes the kernel from its container image and the args from kernelArgs", () => {
    const vmi = cirros();
    vmi.spec.domain.firmware = {
      kernelBoot: { kernelArgs: "seed=7", container: { image: "local/test-guest", kernelPath: "/test-guest.elf" } },
    };
    vmi.spec.domain.cpu = { sockets: 2, cores: 2 };
    vmi.spec.domain.memory = { guest: "1Gi" };
    const spec = toMachineSpec(vmi, ctx);
    expect(spec.boot).toEqual({ kernelPath: join(guestDir, "test-guest.elf"), cmdline: "seed=7", pvmSafe: true });
    expect(spec.vcpus).toBe(4);
    expect(spec.memoryBytes).toBe(1 << 30);
    expect(spec.firmwareUuid).toBeUndefined();
  });

  it("offers the image's uncompressed kernel for its own kernel only, not for another file a VMI names", () => {
    expect(toMachineSpec(cirros(), ctx).boot).toMatchObject({
      kernelPath: join(demoDir, "vmlinuz"),
      uncompressedKernelPath: join(demoDir, "vmlinux"),
    });
    const named = cirros();
    named.spec.domain.firmware = { kernelBoot: { container: { image: "local/demo-linux", kernelPath: "/vmlinuz" } } };
    expect(toMachineSpec(named, ctx).boot?.uncompressedKernelPath).toBe(join(demoDir, "vmlinux"));
    const other = cirros();
    other.spec.domain.firmware = { kernelBoot: { container: { image: "local/demo-linux", kernelPath: "/boot/k2" } } };
    expect(toMachineSpec(other, ctx).boot?.uncompressedKernelPath).toBeUndefined();
    // A manifest naming a vmlinux that is not in the image: the bzImage it is.
    storeImage("local/no-vmlinux", "latest", { kernel: "vmlinuz", uncompressedKernel: "vmlinux", cmdline: "" });
    expect(imageStoreResolver(store)("local/no-vmlinux").uncompressedKernelPath).toBeUndefined();
  });

  it.each([
    [
      "no memory",
      (v: VirtualMachineInstance) => {
        v.spec.domain.resources = {};
      },
      "spec.domain.memory.guest",
    ],
    [
      "a bad memory quantity",
      (v: VirtualMachineInstance) => {
        v.spec.domain.resources = { requests: { memory: "lots" } };
      },
      "spec.domain.resources.requests.memory",
    ],
    [
      "a negative memory quantity",
      (v: VirtualMachineInstance) => {
        v.spec.domain.resources = { requests: { memory: "-1Gi" } };
      },
      "spec.domain.resources.requests.memory",
    ],
    [
      "a bad CPU quantity",
      (v: VirtualMachineInstance) => {
        v.spec.domain.resources = { requests: { memory: "64M", cpu: "-2" } };
      },
      "spec.domain.resources.requests.cpu",
    ],
    [
      "an image not in the store",
      (v: VirtualMachineInstance) => {
        v.spec.volumes![0].containerDisk!.image = "kubevirt/cirros-container-disk-demo:latest";
      },
      "spec.volumes[0].containerDisk.image",
    ],
    [
      "bad base64 user data",
      (v: VirtualMachineInstance) => {
        v.spec.volumes![1].cloudInitNoCloud!.userDataBase64 = "!!!";
      },
      "spec.volumes[1].cloudInitNoCloud",
    ],
    [
      "a kernelPath escaping the image",
      (v: VirtualMachineInstance) => {
        v.spec.domain.firmware = { kernelBoot: { container: { image: "local/test-guest", kernelPath: "../../x" } } };
      },
      "spec.domain.firmware.kernelBoot.container",
    ],
    [
      "a pod interface model KubeVirt does not have",
      (v: VirtualMachineInstance) => {
        v.spec.domain.devices.interfaces = [{ name: "default", masquerade: {}, model: "virtio-foo" }];
        v.spec.networks = [{ name: "default", pod: {} }];
      },
      "spec.domain.devices.interfaces",
    ],
    [
      "nothing bootable",
      (v: VirtualMachineInstance) => {
        v.spec.volumes = [];
      },
      "spec.volumes",
    ],
  ])("rejects %s with a cause naming the field", (_what, mutate, field) => {
    const vmi = cirros();
    mutate(vmi);
    let error: unknown;
    try {
      toMachineSpec(vmi, ctx);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(SpecError);
    expect((error as SpecError).causes.map((c) => c.field)).toContain(field);
  });
});
