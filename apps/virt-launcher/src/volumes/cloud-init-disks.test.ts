import { describe, expect, it } from "vitest";
import {
  buildConfigDriveDisk,
  buildNoCloudDisk,
  type CloudInitIdentity,
  cloudInitSecretData,
  configDriveMetaData,
  noCloudMetaData,
  readCloudInitData,
  sanitizeHostname,
} from "./cloud-init-disks.ts";
import { IsoImageError, VolumeDataError } from "./errors.ts";
import { isoinfoExtract, isoinfoPaths, readMounted, runTool } from "./host-iso-tools.ts";
import { isoScratch } from "./iso-scratch.ts";

const timestamp = new Date("2026-01-02T03:04:05Z");
const identity: CloudInitIdentity = {
  name: "testvmi.web",
  namespace: "default",
  firmwareUuid: "5d307ca9-b3ef-428c-8861-06e72d69f223",
};

const scratch = isoScratch();

describe("cloud-init metadata (KubeVirt's json.Marshal bytes)", () => {
  it("NoCloud meta-data: instance-id is the firmware UUID, local-hostname the name before its first dot", () => {
    expect(noCloudMetaData(identity)).toBe(
      '{"instance-id":"5d307ca9-b3ef-428c-8861-06e72d69f223","local-hostname":"testvmi"}',
    );
  });

  it("NoCloud meta-data: instance-type first, public-keys as a Go map (keys sorted as strings)", () => {
    const keys = Array.from({ length: 11 }, (_, i) => `ssh-ed25519 K${i}`);
    const json = noCloudMetaData({
      ...identity,
      hostname: "custom",
      instanceType: "u1.small",
      publicSshKeys: ["", ...keys],
    });
    expect(json.startsWith('{"instance-type":"u1.small","instance-id":"5d307ca9')).toBe(true);
    expect(json).toContain('"local-hostname":"custom"');
    expect(json).toContain('"public-keys":{"0":"ssh-ed25519 K0","1":"ssh-ed25519 K1","10":"ssh-ed25519 K10","2":');
  });

  it("ConfigDrive meta_data.json: instance_id is name.namespace, uuid the firmware UUID, hostname sanitized", () => {
    expect(configDriveMetaData(identity)).toBe(
      '{"instance_id":"testvmi.web.default","hostname":"testvmi","uuid":"5d307ca9-b3ef-428c-8861-06e72d69f223"}',
    );
    const devices = [
      { type: "nic" as const, bus: "pci", address: "0000:01:00.0", mac: "02:00:00:00:00:01", tags: ["a"] },
    ];
    expect(configDriveMetaData({ ...identity, publicSshKeys: ["k<&>"] }, devices)).toBe(
      '{"instance_id":"testvmi.web.default","hostname":"testvmi","uuid":"5d307ca9-b3ef-428c-8861-06e72d69f223",' +
        '"devices":[{"type":"nic","bus":"pci","address":"0000:01:00.0","mac":"02:00:00:00:00:01","tags":["a"]}],' +
        '"public_keys":{"0":"k\\u003c\\u0026\\u003e"}}',
    );
  });

  it("sanitizeHostname() cuts a long name to 63 characters and prefers spec.hostname", () => {
    expect(sanitizeHostname("a".repeat(70))).toBe("a".repeat(63));
    expect(sanitizeHostname("vm.x", "given")).toBe("given");
  });
});

describe("readCloudInitData()", () => {
  it("takes inline data over base64, and secret contents over both", () => {
    expect(readCloudInitData({ userData: "inline", userDataBase64: "YmFzZTY0" }).userData).toBe("inline");
    expect(readCloudInitData({ userDataBase64: "YmFz\nZTY0" }).userData).toBe("base64");
    const secret = cloudInitSecretData({ userData: "from-secret", networkdata: Buffer.from("net") });
    expect(readCloudInitData({ userData: "inline" }, secret)).toEqual({ userData: "from-secret", networkData: "net" });
  });

  it("refuses no data at all with KubeVirt's message, and bad base64", () => {
    expect(() => readCloudInitData({})).toThrow(
      new VolumeDataError(
        "NO_DATA",
        "userDataBase64, userData, networkDataBase64 or networkData is required for a cloud-init data source",
      ),
    );
    expect(() => readCloudInitData({ userDataBase64: "not base64!" })).toThrow(VolumeDataError);
    expect(() => readCloudInitData({ userDataBase64: "abc" })).toThrow(/not valid base64/);
  });
});

describe("buildNoCloudDisk()", () => {
  const userData = "#cloud-config\nssh_authorized_keys:\n  - ssh-ed25519 AAAA test\n";
  const networkData = "version: 2\nethernets:\n  eth0:\n    dhcp4: true\n";

  it("writes cidata with user-data, meta-data and network-config that isoinfo and a mount read back", (ctx) => {
    const image = buildNoCloudDisk({ userData, networkData }, identity, { timestamp });
    const { file, dir } = scratch(image);
    expect(runTool("blkid", ["-p", "-o", "export", file])).toContain("LABEL=cidata\n");
    expect(isoinfoPaths(file, "-R").sort()).toEqual(["meta-data", "network-config", "user-data"]);
    expect(isoinfoExtract(file, "user-data").toString()).toBe(userData);
    expect(JSON.parse(isoinfoExtract(file, "meta-data").toString())).toEqual({
      "instance-id": identity.firmwareUuid,
      "local-hostname": "testvmi",
    });
    const tree = readMounted(file, dir);
    if (typeof tree === "string") return ctx.skip(`cannot mount an ISO image here (${tree})`);
    expect(tree.files.get("network-config")?.content.toString()).toBe(networkData);
    expect(tree.files.get("user-data")?.mode).toBe(0o100600);
  });

  it("writes an empty user-data and no network-config when only network data is given / only user data", () => {
    const onlyNet = scratch(
      buildNoCloudDisk({ networkDataBase64: Buffer.from(networkData).toString("base64") }, identity, { timestamp }),
    );
    const onlyUser = scratch(buildNoCloudDisk({ userData }, identity, { timestamp }));
    expect(isoinfoExtract(onlyNet.file, "user-data").length).toBe(0);
    expect(isoinfoExtract(onlyNet.file, "network-config").toString()).toBe(networkData);
    expect(isoinfoPaths(onlyUser.file, "-R").sort()).toEqual(["meta-data", "user-data"]);
  });

  it("is reproducible for the same VMI and timestamp", () => {
    const a = buildNoCloudDisk({ userData }, identity, { timestamp });
    expect(buildNoCloudDisk({ userData }, identity, { timestamp }).equals(a)).toBe(true);
  });

  it("refuses user data larger than the image limit with a typed error", () => {
    const huge = "x".repeat(3 * 1024 * 1024);
    const build = (): Buffer =>
      buildNoCloudDisk({ userData: huge }, identity, { timestamp, limits: { maxImageBytes: 2 << 20 } });
    expect(build).toThrow(IsoImageError);
  });
});

describe("buildConfigDriveDisk()", () => {
  it("writes config-2 with openstack/latest/{user_data,meta_data.json,network_data.json}", (ctx) => {
    const networkData = '{"links":[],"networks":[],"services":[]}';
    const image = buildConfigDriveDisk(
      { userData: "#cloud-config\n", networkData },
      { ...identity, publicSshKeys: ["ssh-rsa K"] },
      { timestamp },
    );
    const { file, dir } = scratch(image);
    expect(runTool("blkid", ["-p", "-o", "export", file])).toContain("LABEL=config-2\n");
    expect(isoinfoPaths(file, "-R").sort()).toEqual([
      "openstack",
      "openstack/latest",
      "openstack/latest/meta_data.json",
      "openstack/latest/network_data.json",
      "openstack/latest/user_data",
    ]);
    const meta = JSON.parse(isoinfoExtract(file, "openstack/latest/meta_data.json").toString());
    expect(meta).toEqual({
      instance_id: "testvmi.web.default",
      hostname: "testvmi",
      uuid: identity.firmwareUuid,
      public_keys: { "0": "ssh-rsa K" },
    });
    const tree = readMounted(file, dir);
    if (typeof tree === "string") return ctx.skip(`cannot mount an ISO image here (${tree})`);
    expect(tree.files.get("openstack/latest/network_data.json")?.content.toString()).toBe(networkData);
    expect(tree.files.get("openstack/latest/user_data")?.content.toString()).toBe("#cloud-config\n");
  });
});
