import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { VirtualMachineInstance } from "@kvt/api";
import { afterAll, describe, expect, it } from "vitest";
import { makeWriteLayers } from "../volumes/container-disk-layer.ts";
import { ensureQemuUtils, qemuImg, qemuIo } from "../volumes/host-qemu-img.ts";
import { disksNeedQemu, hostPathOf, localDisksBlocker, parseVolumeMounts, planDisks, prepareDisks } from "./disks.ts";
import { imageStoreResolver } from "./image-store.ts";
import { buildMachineSpec, SpecError } from "./machine-spec.ts";

const root = mkdtempSync(join(tmpdir(), "kvt-disks-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const store = join(root, "store");
const imageDir = join(store, "local", "disk-image", "latest");
mkdirSync(imageDir, { recursive: true });
writeFileSync(
  join(imageDir, "image.json"),
  JSON.stringify({ schemaVersion: 1, kernel: "vmlinuz", cmdline: "root=/dev/vda", pvmSafe: false, disk: "disk.img" }),
);
writeFileSync(join(imageDir, "vmlinuz"), "kernel");
writeFileSync(join(imageDir, "disk.img"), Buffer.alloc(4096, 7));

function vmiWith(volumes: unknown[], disks: unknown[], volumeStatus?: unknown[]): VirtualMachineInstance {
  return {
    apiVersion: "kubevirt.io/v1",
    kind: "VirtualMachineInstance",
    metadata: { name: "vm", namespace: "ns", uid: "u1" },
    spec: { domain: { devices: { disks }, memory: { guest: "64Mi" } }, volumes },
    ...(volumeStatus ? { status: { volumeStatus } } : {}),
  } as VirtualMachineInstance;
}

describe("volume mounts", () => {
  it("maps a path through the longest mount holding it, and leaves others as they are", () => {
    const mounts = parseVolumeMounts(
      JSON.stringify([
        { mountPath: "/var/run/kubevirt-private/vmi-disks/data", hostPath: "/h/pv1" },
        { mountPath: "/var/run/kubevirt-private", hostPath: "/h/priv" },
      ]),
    );
    expect(hostPathOf("/var/run/kubevirt-private/vmi-disks/data/disk.img", mounts)).toBe("/h/pv1/disk.img");
    expect(hostPathOf("/var/run/kubevirt-private/x", mounts)).toBe("/h/priv/x");
    expect(hostPathOf("/var/run/kubevirt-privateX", mounts)).toBe("/var/run/kubevirt-privateX");
    expect(hostPathOf("/elsewhere", mounts)).toBe("/elsewhere");
  });

  it("refuses a malformed KVT_VOLUME_MOUNTS with its name", () => {
    expect(parseVolumeMounts(undefined)).toEqual([]);
    expect(() => parseVolumeMounts("{")).toThrow(/KVT_VOLUME_MOUNTS is not JSON/);
    expect(() => parseVolumeMounts("{}")).toThrow(/must be a JSON array/);
    expect(() => parseVolumeMounts('[{"mountPath":"rel","hostPath":"/x"}]')).toThrow(/KVT_VOLUME_MOUNTS\[0\]/);
  });
});

describe("planDisks and prepareDisks", () => {
  const pvDir = join(root, "pv-data");
  const ephemeral = join(root, "ephemeral");
  const hostDir = join(root, "host");
  mkdirSync(pvDir, { recursive: true });
  mkdirSync(ephemeral, { recursive: true });
  mkdirSync(hostDir, { recursive: true });
  const mounts = [
    { mountPath: "/var/run/kubevirt-private/vmi-disks/data", hostPath: pvDir },
    { mountPath: "/var/run/kubevirt-private/vmi-disks/host", hostPath: hostDir },
    { mountPath: "/var/run/kubevirt-ephemeral-disks", hostPath: ephemeral },
  ];
  const ctx = { resolveImage: imageStoreResolver(store), mounts, workDir: join(root, "work") };
  const vmi = vmiWith(
    [
      { name: "root", containerDisk: { image: "local/disk-image" } },
      { name: "data", persistentVolumeClaim: { claimName: "pvc1" } },
      { name: "scratch", emptyDisk: { capacity: "10Mi" } },
      { name: "host", hostDisk: { path: "/srv/vm/host.img", type: "DiskOrCreate", capacity: "3Mi" } },
      { name: "cloudinitdisk", cloudInitNoCloud: { userData: "#cloud-config\n" } },
    ],
    [
      { name: "root", disk: { bus: "virtio" } },
      { name: "data", serial: "DATA1", cache: "none", io: "native" },
      { name: "scratch" },
      { name: "host", disk: { readonly: false } },
      { name: "cloudinitdisk" },
    ],
    [
      {
        name: "data",
        target: "vdb",
        persistentVolumeClaimInfo: {
          accessModes: ["ReadWriteOnce"],
          capacity: { storage: "100Mi" },
          filesystemOverhead: "0.055",
        },
      },
    ],
  );

  it("places each volume's file where KubeVirt's pod has it, in spec order, with the disk's fields", () => {
    const causes: { field: string; message: string }[] = [];
    const disks = planDisks(vmi, ctx, causes);
    expect(causes).toEqual([]);
    expect(disks.map((d) => [d.name, d.kind, d.path])).toEqual([
      ["root", "containerDisk", join(ephemeral, "container-disks", "root.img")],
      ["data", "persistentVolumeClaim", join(pvDir, "disk.img")],
      ["scratch", "emptyDisk", join(ephemeral, "empty-disks", "scratch.img")],
      ["host", "hostDisk", join(hostDir, "host.img")],
      ["cloudinitdisk", "cloudInitNoCloud", join(root, "work", "cloud-init", "cloudinitdisk.iso")],
    ]);
    // 100Mi less 5.5%, down to whole MiB: 94 MiB.
    expect(disks[1]).toMatchObject({ serial: "DATA1", cache: "none", io: "native", createBytes: 94 * 2 ** 20 });
    expect(disks[2]).toMatchObject({ createBytes: 10 * 2 ** 20, fresh: true, shared: false });
    // Every writable disk is local (the claim is ReadWriteOnce): QEMU's block migration can copy them all.
    expect(localDisksBlocker(disks)).toBeUndefined();
    // With a writable disk on shared storage as well, QEMU would copy that one too: refused, naming both.
    const rwx = { ...disks[1], name: "shared", shared: true };
    expect(localDisksBlocker([...disks, rwx])).toBe(
      "cannot migrate VMI: local disks (root: containerDisk, data: persistentVolumeClaim, scratch: emptyDisk, host: hostDisk) are copied by QEMU's block migration, which would also overwrite the shared disks (shared: persistentVolumeClaim)",
    );
    expect(localDisksBlocker([rwx, disks[4]])).toBeUndefined();
  });

  it("makes the files: sparse new disks, keeps a claim's existing disk.img, checks the containerDisk image", async () => {
    writeFileSync(join(pvDir, "disk.img"), "kept");
    const spec = await buildMachineSpec(vmi, ctx);
    // The containerDisk's write layer comes with the backend (container-disk-layer.test.ts); the image is named.
    expect(spec.disks?.[0]).toMatchObject({ name: "root", copyFrom: join(imageDir, "disk.img") });
    expect(existsSync(join(ephemeral, "container-disks", "root.img"))).toBe(false);
    expect(readFileSync(join(pvDir, "disk.img"), "utf8")).toBe("kept");
    expect(statSync(join(ephemeral, "empty-disks", "scratch.img")).size).toBe(10 * 2 ** 20);
    expect(statSync(join(hostDir, "host.img")).size).toBe(3 * 2 ** 20);
    expect(spec.disks?.length).toBe(5);
    expect(readFileSync(join(root, "work", "cloud-init", "cloudinitdisk.iso")).toString("latin1")).toContain(
      "#cloud-config",
    );
    rmSync(join(pvDir, "disk.img"));
    await buildMachineSpec(vmi, ctx);
    expect(statSync(join(pvDir, "disk.img")).size).toBe(94 * 2 ** 20);
  });

  it("puts an ephemeral volume's copy-on-write layer over its claim's disk.img, which stays unwritten", async () => {
    const claimDir = join(root, "eph-claim");
    mkdirSync(claimDir, { recursive: true });
    writeFileSync(join(claimDir, "disk.img"), Buffer.alloc(1 << 20, 3));
    const ephMounts = [...mounts, { mountPath: "/var/run/kubevirt-private/vmi-disks/eph", hostPath: claimDir }];
    const eph = vmiWith(
      [
        { name: "root", containerDisk: { image: "local/disk-image" } },
        { name: "eph", ephemeral: { persistentVolumeClaim: { claimName: "golden" } } },
      ],
      [{ name: "root" }, { name: "eph" }],
    );
    const spec = await buildMachineSpec(eph, { ...ctx, mounts: ephMounts });
    expect(spec.disks?.[1]).toMatchObject({
      kind: "ephemeral",
      shared: false,
      copyFrom: join(claimDir, "disk.img"),
      path: join(ephemeral, "ephemeral-volumes", "eph.img"),
    });
    const [, layer] = await makeWriteLayers(spec.disks ?? [], "native");
    expect(layer).toMatchObject({
      base: join(claimDir, "disk.img"),
      path: join(ephemeral, "ephemeral-volumes", "eph.img"),
    });
    expect(statSync(layer.path).size).toBe(1 << 20);
    expect(readFileSync(join(claimDir, "disk.img"))).toEqual(Buffer.alloc(1 << 20, 3));
    // The claim not mounted: the VMI is refused naming the volume.
    await expect(buildMachineSpec(eph, ctx)).rejects.toThrow(/volume eph: its volume is not mounted/);
  });

  it("says which volume is not mounted, and refuses other buses and bad hostDisks", async () => {
    const unmounted = vmiWith(
      [
        { name: "d", persistentVolumeClaim: { claimName: "c" } },
        { name: "boot", containerDisk: { image: "local/disk-image" } },
      ],
      [{ name: "d" }],
    );
    await expect(buildMachineSpec(unmounted, { ...ctx, mounts: [] })).rejects.toThrow(SpecError);
    await expect(buildMachineSpec(unmounted, { ...ctx, mounts: [] })).rejects.toThrow(
      /volume d: its volume is not mounted at \/var\/run\/kubevirt-private\/vmi-disks\/d/,
    );
    const causes: { field: string; message: string }[] = [];
    planDisks(
      vmiWith(
        [
          { name: "s", emptyDisk: { capacity: "1Mi" } },
          { name: "h", hostDisk: { path: "/x/y.img", type: "DiskOrCreate" } },
        ],
        [{ name: "s", disk: { bus: "usb" } }, { name: "h" }],
      ),
      ctx,
      causes,
    );
    expect(causes).toEqual([
      {
        field: "spec.domain.devices.disks[0]",
        message: "bus usb is not supported by this launcher; use virtio, sata or scsi",
      },
      { field: "spec.volumes[1].hostDisk.capacity", message: "DiskOrCreate needs a capacity" },
    ]);
  });

  it("keeps sata and scsi disks and CD-ROMs (sata by default) for QEMU, and says why the VMI needs it", () => {
    const disks = planDisks(
      vmiWith(
        [
          { name: "a", emptyDisk: { capacity: "1Mi" } },
          { name: "b", emptyDisk: { capacity: "1Mi" } },
          { name: "c", cloudInitNoCloud: { userData: "#!/bin/sh\n" } },
        ],
        [
          { name: "a", disk: { bus: "sata" } },
          { name: "b", disk: { bus: "scsi" } },
          { name: "c", cdrom: {} },
        ],
      ),
      { ...ctx, mounts: [] },
      [],
    );
    expect(disks.map((d) => [d.name, d.bus, d.cdrom ?? false, d.readOnly])).toEqual([
      ["a", "sata", false, false],
      ["b", "scsi", false, false],
      ["c", "sata", true, true],
    ]);
    expect(disksNeedQemu(disks)).toBe("disk a (bus sata), b (bus scsi) needs a device only QEMU provides");
    // A cloud-init ISO on its default sata bus stays with our VMM (a virtio disk there: it is found by its label).
    expect(disksNeedQemu(disks.slice(2))).toBeUndefined();
    expect(disksNeedQemu(disks.map((d) => ({ ...d, bus: "virtio" as const })))).toBeUndefined();
  });

  it("puts ephemeral disks in the work dir when the pod mounts no ephemeral-disks volume", async () => {
    const disks = planDisks(
      vmiWith([{ name: "s", emptyDisk: { capacity: "1Mi" } }], [{ name: "s" }]),
      { ...ctx, mounts: [] },
      [],
    );
    expect(disks[0]?.path).toBe(join(root, "work", "ephemeral-disks", "empty-disks", "s.img"));
    expect(await prepareDisks(disks)).toEqual([]);
    expect(existsSync(disks[0].path)).toBe(true);
  });

  it("RWX claims and read-only disks keep the guest migratable", () => {
    const disks = planDisks(
      vmiWith(
        [
          { name: "data", persistentVolumeClaim: { claimName: "pvc1" } },
          { name: "root", containerDisk: { image: "local/disk-image" } },
        ],
        [{ name: "data" }, { name: "root", disk: { readonly: true } }],
        [{ name: "data", target: "vda", persistentVolumeClaimInfo: { accessModes: ["ReadWriteMany"] } }],
      ),
      ctx,
      [],
    );
    expect(disks.map((d) => [d.name, d.shared, d.readOnly])).toEqual([
      ["data", true, false],
      ["root", false, true],
    ]);
    expect(localDisksBlocker(disks)).toBeUndefined();
  });
});

describe("config volumes as ISO disks", () => {
  const base = join(root, "config");
  /** A directory laid out as the kubelet's atomic writer leaves it: the payload, `..data`, a symlink per key. */
  function kubeletDir(name: string, files: Record<string, string>): string {
    const dir = join(base, name);
    const payload = join(dir, "..2026_11_25_00_00_00.1");
    for (const [key, value] of Object.entries(files)) {
      mkdirSync(join(payload, key, ".."), { recursive: true });
      writeFileSync(join(payload, key), value);
    }
    mkdirSync(payload, { recursive: true });
    symlinkSync("..2026_11_25_00_00_00.1", join(dir, "..data"));
    for (const top of new Set(Object.keys(files).map((k) => k.split("/")[0])))
      symlinkSync(join("..data", top), join(dir, top));
    return dir;
  }
  const mounts = [
    { mountPath: "/var/run/kubevirt-private/config-map/cm", hostPath: kubeletDir("cm", { "app.conf": "mode=fast" }) },
    { mountPath: "/var/run/kubevirt-private/secret/sec", hostPath: kubeletDir("sec", { password: "s3cr3t" }) },
    {
      mountPath: "/var/run/kubevirt-private/downwardapi/dapi",
      hostPath: kubeletDir("dapi", { "meta/labels": 'app="demo"' }),
    },
    {
      mountPath: "/var/run/secrets/kubernetes.io/serviceaccount",
      hostPath: kubeletDir("sa", { token: "", "ca.crt": "PEM", namespace: "ns" }),
    },
  ];
  const ctx = { resolveImage: imageStoreResolver(store), mounts, workDir: join(root, "work-config") };
  const volumes = [
    { name: "cm", configMap: { name: "app-config", volumeLabel: "APPCFG" } },
    { name: "sec", secret: { secretName: "app-secret" } },
    { name: "dapi", downwardAPI: { fields: [{ path: "meta/labels", fieldRef: { fieldPath: "metadata.labels" } }] } },
    { name: "sa", serviceAccount: { serviceAccountName: "robot" } },
  ];
  const disks = [
    { name: "sa", serial: "SA" },
    { name: "cm", serial: "CM" },
    { name: "sec", cdrom: { bus: "sata" } },
    { name: "dapi" },
  ];

  it("makes a read-only, shared ISO per volume from the mounted files, in spec order", () => {
    const causes: { field: string; message: string }[] = [];
    const planned = planDisks(vmiWith(volumes, disks), ctx, causes);
    expect(causes).toEqual([]);
    expect(planned.map((d) => [d.name, d.kind, d.path, d.readOnly, d.shared, d.fresh])).toEqual([
      ["sa", "serviceAccount", join(root, "work-config", "config-disks", "sa.iso"), true, true, true],
      ["cm", "configMap", join(root, "work-config", "config-disks", "cm.iso"), true, true, true],
      ["sec", "secret", join(root, "work-config", "config-disks", "sec.iso"), true, true, true],
      ["dapi", "downwardAPI", join(root, "work-config", "config-disks", "dapi.iso"), true, true, true],
    ]);
    expect(planned[1].serial).toBe("CM");
    expect(planned[2]).toMatchObject({ bus: "sata", cdrom: true, readOnly: true });
    const iso = (i: number): string => Buffer.from(planned[i].contents!).toString("latin1");
    // The volume label (the primary descriptor's volume id at byte 32768 + 40), then the keys' values.
    expect(iso(1).slice(32768 + 40, 32768 + 46)).toBe("APPCFG");
    expect(iso(1)).toContain("mode=fast");
    expect(iso(2).slice(32768 + 40, 32768 + 47)).toBe("cfgdata");
    expect(iso(2)).toContain("s3cr3t");
    expect(iso(3)).toContain('app="demo"');
    expect(iso(0)).toContain("PEM");
    // The atomic writer's own entries are not part of the disk.
    expect(iso(1)).not.toContain("..data");
    expect(localDisksBlocker(planned)).toBeUndefined();
  });

  it("a config disk on a sata hard disk (KubeVirt's default bus) stays writable, as QEMU's ide-hd must be", () => {
    const sata = planDisks(vmiWith(volumes, [{ name: "cm", disk: { bus: "sata" } }]), ctx, []);
    expect(sata).toMatchObject([{ name: "cm", bus: "sata", readOnly: false, shared: true, fresh: true }]);
    const asked = planDisks(vmiWith(volumes, [{ name: "cm", disk: { bus: "sata", readonly: true } }]), ctx, []);
    expect(asked[0].readOnly).toBe(true);
  });

  it("prepareDisks writes the ISO where the plan says", async () => {
    const planned = planDisks(vmiWith(volumes, disks), ctx, []);
    expect(await prepareDisks(planned)).toEqual([]);
    expect(readFileSync(join(root, "work-config", "config-disks", "cm.iso"))).toEqual(
      Buffer.from(planned[1].contents!),
    );
  });

  it("a volume whose files are not mounted is a cause naming it; the other disks stay", () => {
    const causes: { field: string; message: string }[] = [];
    const planned = planDisks(
      vmiWith([...volumes, { name: "gone", configMap: { name: "x" } }], [...disks, { name: "gone" }]),
      ctx,
      causes,
    );
    expect(planned.map((d) => d.name)).toEqual(["sa", "cm", "sec", "dapi"]);
    expect(causes).toEqual([
      {
        field: "spec.volumes[4].configMap",
        message: "volume gone: its files are not mounted at /var/run/kubevirt-private/config-map/gone",
      },
    ]);
  });

  it("an ISO the writer refuses (a volume label over 32 characters) is a cause naming the volume", () => {
    const causes: { field: string; message: string }[] = [];
    const long = [{ name: "cm", configMap: { name: "app-config", volumeLabel: "X".repeat(33) } }];
    expect(planDisks(vmiWith(long, [{ name: "cm" }]), ctx, causes)).toEqual([]);
    expect(causes).toHaveLength(1);
    expect(causes[0]).toMatchObject({
      field: "spec.volumes[0].configMap",
      message: expect.stringMatching(/^volume cm: /),
    });
  });
});

describe("containerDisk images: checked before the machine is built", () => {
  it("takes a qcow2 image over a raw backing file, and refuses a truncated one with the reason", async () => {
    await ensureQemuUtils();
    const dir = join(root, "qcow-store", "local", "qcow", "latest");
    mkdirSync(dir, { recursive: true });
    writeFileSync(
      join(dir, "image.json"),
      JSON.stringify({ schemaVersion: 1, kernel: "vmlinuz", cmdline: "", pvmSafe: false, disk: "disk.qcow2" }),
    );
    writeFileSync(join(dir, "vmlinuz"), "kernel");
    const base = Buffer.alloc(1 << 20, 0);
    base.write("base-data", 0);
    writeFileSync(join(dir, "base.raw"), base);
    qemuImg("create", "-q", "-f", "qcow2", "-b", "base.raw", "-F", "raw", join(dir, "disk.qcow2"));
    qemuIo(join(dir, "disk.qcow2"), "write -P 0x61 65536 4096");
    const vmi = vmiWith([{ name: "root", containerDisk: { image: "local/qcow" } }], [{ name: "root" }]);
    const ctx = { resolveImage: imageStoreResolver(join(root, "qcow-store")), mounts: [], workDir: join(root, "qw") };
    const spec = await buildMachineSpec(vmi, ctx);
    expect(spec.disks![0]).toMatchObject({ copyFrom: join(dir, "disk.qcow2") });
    expect(spec.disks![0].incoming).toBeUndefined();
    // A migration target's layer starts empty: the source's stream fills it.
    const target = await buildMachineSpec(vmi, { ...ctx, workDir: join(root, "qt") }, "target");
    expect(target.disks![0]).toMatchObject({ incoming: true });
    // A truncated image: the VMI is refused with the image's problem, nothing crashes.
    const whole = readFileSync(join(dir, "disk.qcow2"));
    writeFileSync(join(dir, "disk.qcow2"), whole.subarray(0, 200));
    await expect(buildMachineSpec(vmi, ctx)).rejects.toThrow(/volume root: its image is not usable: .*disk\.qcow2/);
  });
});
