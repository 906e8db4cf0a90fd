import { lstatSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { V1ConfigMap, V1Pod, V1Secret, V1Volume } from "../cluster/kube-models.ts";
import { type ConfigLookups, podFieldValue, setUpConfigVolume, writeAtomically } from "./config-volumes.ts";

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "kvt-config-volumes-"));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const pod: V1Pod = {
  metadata: {
    name: "virt-launcher-a-x1",
    namespace: "ns",
    uid: "u1",
    labels: { "kubevirt.io": "virt-launcher", app: 'say "hi"' },
    annotations: { note: "a\nb" },
  },
  spec: { containers: [{ name: "compute" }], nodeName: "node01", serviceAccountName: "robot" },
};

const configMap: V1ConfigMap = {
  metadata: { name: "app-config", namespace: "ns" },
  data: { "app.conf": "mode=fast\n", greeting: "hello" },
  binaryData: { blob: Buffer.from([0, 1, 2]).toString("base64") },
};
const secret: V1Secret = {
  metadata: { name: "app-secret", namespace: "ns" },
  data: { password: Buffer.from("s3cr3t").toString("base64") },
};

const lookups = (over: Partial<ConfigLookups> = {}): ConfigLookups => ({
  configMap: (_ns, name) => Promise.resolve(name === "app-config" ? configMap : undefined),
  secret: (_ns, name) => Promise.resolve(name === "app-secret" ? secret : undefined),
  serviceAccount: (_ns, name) => Promise.resolve(name === "robot" ? { metadata: { name } } : undefined),
  token: () => Promise.resolve(undefined),
  ...over,
});

/** The volume's files as a reader inside the container sees them (symlinks followed, `..` entries skipped). */
function seen(path: string, prefix = ""): Record<string, string> {
  const out: Record<string, string> = {};
  for (const entry of readdirSync(path)) {
    if (entry.startsWith("..")) continue;
    const full = join(path, entry);
    if (statSync(full).isDirectory()) Object.assign(out, seen(full, `${prefix}${entry}/`));
    else out[`${prefix}${entry}`] = readFileSync(full, "latin1");
  }
  return out;
}

async function setUp(volume: V1Volume, l = lookups()): Promise<{ hostPath: string } | { message: string }> {
  return setUpConfigVolume(pod, dir, volume, l);
}

describe("setUpConfigVolume()", () => {
  it("writes a configMap's data and binaryData, one file per key, under kubernetes.io~configmap", async () => {
    const r = await setUp({ name: "cm", configMap: { name: "app-config" } });
    expect(r).toEqual({ hostPath: join(dir, "volumes/kubernetes.io~configmap/cm") });
    const path = (r as { hostPath: string }).hostPath;
    expect(seen(path)).toEqual({ "app.conf": "mode=fast\n", greeting: "hello", blob: "\u0000\u0001\u0002" });
    expect(statSync(join(path, "greeting")).mode & 0o777).toBe(0o644);
  });

  it("lays the files out as kubelet's atomic writer: ..data, a timestamped payload, a symlink per key", async () => {
    const path = ((await setUp({ name: "cm", configMap: { name: "app-config" } })) as { hostPath: string }).hostPath;
    expect(readlinkSync(join(path, "greeting"))).toBe("..data/greeting");
    expect(readlinkSync(join(path, "..data"))).toMatch(/^\.\.\d{4}_\d\d_\d\d_\d\d_\d\d_\d\d\.\d+$/);
    expect(lstatSync(join(path, "greeting")).isSymbolicLink()).toBe(true);
  });

  it("honours items (key -> path, its mode) and defaultMode", async () => {
    const r = await setUp({
      name: "cm",
      configMap: { name: "app-config", defaultMode: 0o600, items: [{ key: "greeting", path: "sub/hello.txt" }] },
    });
    const path = (r as { hostPath: string }).hostPath;
    expect(seen(path)).toEqual({ "sub/hello.txt": "hello" });
    expect(statSync(join(path, "sub/hello.txt")).mode & 0o777).toBe(0o600);
  });

  it("decodes a secret's data", async () => {
    const r = await setUp({ name: "sec", secret: { secretName: "app-secret" } });
    expect(r).toEqual({ hostPath: join(dir, "volumes/kubernetes.io~secret/sec") });
    expect(seen((r as { hostPath: string }).hostPath)).toEqual({ password: "s3cr3t" });
  });

  it.each([
    [
      { name: "cm", configMap: { name: "missing" } },
      'MountVolume.SetUp failed for volume "cm" : configmap "missing" not found',
    ],
    [
      { name: "sec", secret: { secretName: "missing" } },
      'MountVolume.SetUp failed for volume "sec" : secret "missing" not found',
    ],
    [
      { name: "cm", configMap: { name: "app-config", items: [{ key: "nope", path: "x" }] } },
      'MountVolume.SetUp failed for volume "cm" : configmap references non-existent config key: nope',
    ],
    [
      { name: "sec", secret: { secretName: "app-secret", items: [{ key: "nope", path: "x" }] } },
      'MountVolume.SetUp failed for volume "sec" : secret references non-existent secret key: nope',
    ],
  ] as [V1Volume, string][])(
    "fails a missing non-optional object or key with kubelet's message (%#)",
    async (volume, message) => {
      expect(await setUp(volume)).toEqual({ message });
    },
  );

  it("an optional missing object gives an empty directory, an optional missing key is left out", async () => {
    const cm = await setUp({ name: "cm", configMap: { name: "missing", optional: true } });
    expect(seen((cm as { hostPath: string }).hostPath)).toEqual({});
    const sec = await setUp({
      name: "sec",
      secret: { secretName: "app-secret", optional: true, items: [{ key: "nope", path: "x" }] },
    });
    expect(seen((sec as { hostPath: string }).hostPath)).toEqual({});
  });

  it("renders downwardAPI items from the pod's metadata in kubelet's format", async () => {
    const r = await setUp({
      name: "dapi",
      downwardAPI: {
        items: [
          { path: "labels", fieldRef: { fieldPath: "metadata.labels" } },
          { path: "annotations", fieldRef: { fieldPath: "metadata.annotations" } },
          { path: "name", fieldRef: { fieldPath: "metadata.name" } },
          { path: "app", fieldRef: { fieldPath: "metadata.labels['app']" } },
        ],
      },
    });
    expect(r).toEqual({ hostPath: join(dir, "volumes/kubernetes.io~downward-api/dapi") });
    expect(seen((r as { hostPath: string }).hostPath)).toEqual({
      labels: 'app="say \\"hi\\""\nkubevirt.io="virt-launcher"',
      annotations: 'note="a\\nb"',
      name: "virt-launcher-a-x1",
      app: 'say "hi"',
    });
  });

  it("projects the service account volume: the token TokenRequest gives, ca.crt, namespace", async () => {
    const ca: V1ConfigMap = { metadata: { name: "kube-root-ca.crt" }, data: { "ca.crt": "PEM" } };
    const volume: V1Volume = {
      name: "sa",
      projected: {
        sources: [
          { serviceAccountToken: { path: "token", expirationSeconds: 3607 } },
          { configMap: { name: "kube-root-ca.crt", items: [{ key: "ca.crt", path: "ca.crt" }] } },
          { downwardAPI: { items: [{ path: "namespace", fieldRef: { fieldPath: "metadata.namespace" } }] } },
        ],
      },
    };
    const asked: unknown[] = [];
    const l = lookups({
      configMap: () => Promise.resolve(ca),
      token: (...args) => {
        asked.push(args);
        return Promise.resolve("jwt");
      },
    });
    const r = await setUp(volume, l);
    expect(r).toEqual({ hostPath: join(dir, "volumes/kubernetes.io~projected/sa") });
    expect(seen((r as { hostPath: string }).hostPath)).toEqual({ token: "jwt", "ca.crt": "PEM", namespace: "ns" });
    expect(asked).toEqual([["ns", "robot", 3607, undefined]]);
    // A server without TokenRequest, or a missing account, fails the mount as kubelet's token manager does.
    expect(await setUp(volume, lookups({ configMap: () => Promise.resolve(ca) }))).toEqual({
      message:
        'MountVolume.SetUp failed for volume "sa" : failed to fetch token: the server could not find the requested resource',
    });
    const noAccount = await setUpConfigVolume(
      { ...pod, spec: { ...pod.spec!, serviceAccountName: "ghost" } },
      dir,
      volume,
      l,
    );
    expect(noAccount).toEqual({
      message: 'MountVolume.SetUp failed for volume "sa" : failed to fetch token: serviceaccounts "ghost" not found',
    });
  });
});

describe("writeAtomically()", () => {
  it("replaces an earlier payload: old keys and the old payload directory are gone", () => {
    const path = join(dir, "v");
    writeAtomically(path, new Map([["a", { data: Buffer.from("1"), mode: 0o644 }]]), new Date(0));
    writeAtomically(path, new Map([["b", { data: Buffer.from("2"), mode: 0o644 }]]), new Date(1000));
    expect(seen(path)).toEqual({ b: "2" });
    expect(readdirSync(path).filter((e) => e.startsWith("..")).length).toBe(2);
  });

  it("refuses paths that leave the volume", () => {
    expect(() => writeAtomically(join(dir, "v"), new Map([["../x", { data: Buffer.from(""), mode: 0o644 }]]))).toThrow(
      /must be relative/,
    );
  });
});

describe("downward API values", () => {
  it("podFieldValue refuses an unsupported fieldPath", () => {
    expect(podFieldValue(pod, "spec.nodeName")).toEqual({ value: "node01" });
    expect(podFieldValue(pod, "status.phase")).toEqual({ error: "unsupported fieldPath: status.phase" });
  });
});
