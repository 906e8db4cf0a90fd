import { goFormatMap } from "@kvt/api";
import { describe, expect, it } from "vitest";
import {
  buildConfigMapDisk,
  buildDownwardApiDisk,
  buildSecretDisk,
  buildServiceAccountDisk,
  downwardApiFiles,
} from "./config-disks.ts";
import { IsoImageError, VolumeDataError } from "./errors.ts";
import { isoinfoExtract, isoinfoPaths, readMounted, runTool } from "./host-iso-tools.ts";
import { isoScratch } from "./iso-scratch.ts";

const timestamp = new Date("2026-01-02T03:04:05Z");
const scratch = isoScratch();
function label(file: string): string | undefined {
  return /^LABEL=(.*)$/m.exec(runTool("blkid", ["-p", "-o", "export", file]))?.[1];
}

describe("buildConfigMapDisk() / buildSecretDisk()", () => {
  const data = {
    "app.properties": "color=blue\nsize=3\n",
    "UPPER.case": "x",
    "key-with-a-rather-long-name-that-joliet-cannot-hold-whole.yaml.example": "long",
    empty: "",
    "binary.bin": Uint8Array.from([0, 255, 1, 254]),
  };

  it("writes one file per key, label cfgdata by default, that a mount reads back exactly", (ctx) => {
    const { file, dir } = scratch(buildConfigMapDisk(data, { timestamp }));
    expect(label(file)).toBe("cfgdata");
    expect(isoinfoPaths(file, "-R").sort()).toEqual(Object.keys(data).sort());
    expect([...isoinfoExtract(file, "binary.bin")]).toEqual([0, 255, 1, 254]);
    const tree = readMounted(file, dir);
    if (typeof tree === "string") return ctx.skip(`cannot mount an ISO image here (${tree})`);
    expect([...tree.files.keys()].sort()).toEqual(Object.keys(data).sort());
    expect(tree.files.get("app.properties")?.content.toString()).toBe(data["app.properties"]);
    expect(tree.files.get("empty")?.content.length).toBe(0);
    expect(tree.files.get("app.properties")?.mode).toBe(0o100644);
  });

  it("uses the volume's volumeLabel, and an items path with '/' becomes a directory", () => {
    const { file } = scratch(
      buildSecretDisk(
        { "tls/tls.crt": "CRT", "tls/tls.key": "KEY" },
        { timestamp, volumeLabel: "secrets", fileMode: 0o400 },
      ),
    );
    expect(label(file)).toBe("secrets");
    expect(isoinfoPaths(file, "-R").sort()).toEqual(["tls", "tls/tls.crt", "tls/tls.key"]);
  });

  it("is the same image whatever the key order", () => {
    const reversed = Object.fromEntries(Object.entries(data).reverse());
    expect(buildConfigMapDisk(reversed, { timestamp }).equals(buildConfigMapDisk(data, { timestamp }))).toBe(true);
  });

  it("refuses adversarial input with typed errors", () => {
    expect(() => buildConfigMapDisk({ "": "x" }, { timestamp })).toThrow(IsoImageError);
    expect(() => buildConfigMapDisk({ ["k".repeat(254)]: "x" }, { timestamp })).toThrow(/254-byte name/);
    expect(() => buildConfigMapDisk({ a: 5 as unknown as string }, { timestamp })).toThrow(VolumeDataError);
    expect(() =>
      buildSecretDisk({ k: "v" }, { timestamp, volumeLabel: "a-label-longer-than-thirty-two-chars" }),
    ).toThrow(expect.objectContaining({ code: "INVALID_VOLUME_ID" }));
    const many = Object.fromEntries(Array.from({ length: 5000 }, (_, i) => [`key${i}`, "v"]));
    expect(() => buildConfigMapDisk(many, { timestamp })).toThrow(expect.objectContaining({ code: "TOO_MANY_FILES" }));
    const huge = { big: Buffer.alloc(65 * 1024 * 1024) };
    expect(() => buildSecretDisk(huge, { timestamp })).toThrow(expect.objectContaining({ code: "IMAGE_TOO_LARGE" }));
  });

  it("holds 1000 keys of 1 KiB (a full ConfigMap) readable through isoinfo", () => {
    const big = Object.fromEntries(Array.from({ length: 1000 }, (_, i) => [`key-${i}`, `${i}`.padEnd(1024, ".")]));
    const { file } = scratch(buildConfigMapDisk(big, { timestamp }));
    expect(isoinfoPaths(file, "-R").length).toBe(1000);
    expect(isoinfoExtract(file, "key-999").toString()).toBe(big["key-999"]);
  });
});

describe("buildServiceAccountDisk()", () => {
  it("writes ca.crt, namespace and token with label cfgdata", (ctx) => {
    const account = { token: "eyJhbGciOi.token", namespace: "default", "ca.crt": "-----BEGIN CERTIFICATE-----\n" };
    const { file, dir } = scratch(buildServiceAccountDisk(account, { timestamp }));
    expect(label(file)).toBe("cfgdata");
    expect(isoinfoPaths(file, "-R").sort()).toEqual(["ca.crt", "namespace", "token"]);
    const tree = readMounted(file, dir);
    if (typeof tree === "string") return ctx.skip(`cannot mount an ISO image here (${tree})`);
    expect(tree.files.get("token")?.content.toString()).toBe(account.token);
    expect(tree.files.get("namespace")?.content.toString()).toBe("default");
  });
});

describe("downwardAPI", () => {
  it('formats labels and annotations as the kubelet does: sorted key="value" lines, Go quoting, no final newline', () => {
    expect(goFormatMap({ zone: "us-east", app: 'we"b', "kubevirt.io/domain": "vm\n1", uni: "é\u0001" })).toBe(
      'app="we\\"b"\nkubevirt.io/domain="vm\\n1"\nuni="é\\x01"\nzone="us-east"',
    );
    expect(goFormatMap({})).toBe("");
  });

  it("renders fieldRef paths and writes them as a disk with the volume's label", () => {
    const object = {
      name: "vmi",
      namespace: "ns",
      uid: "u-1",
      labels: { a: "1", b: "2" },
      annotations: { note: "hi" },
    };
    const files = downwardApiFiles(object, [
      { path: "labels", fieldRef: { fieldPath: "metadata.labels" } },
      { path: "annotations", fieldRef: { fieldPath: "metadata.annotations" } },
      { path: "name", fieldRef: { fieldPath: "metadata.name" } },
      { path: "label-a", fieldRef: { fieldPath: "metadata.labels['a']" } },
    ]);
    expect(files).toEqual({ labels: 'a="1"\nb="2"', annotations: 'note="hi"', name: "vmi", "label-a": "1" });
    const { file } = scratch(buildDownwardApiDisk(files, { timestamp, volumeLabel: "podinfo" }));
    expect(label(file)).toBe("podinfo");
    expect(isoinfoExtract(file, "labels").toString()).toBe('a="1"\nb="2"');
    expect(() => downwardApiFiles(object, [{ path: "x", fieldRef: { fieldPath: "spec.nodeName" } }])).toThrow(
      VolumeDataError,
    );
  });
});
