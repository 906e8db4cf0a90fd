import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { V1PersistentVolume, V1PersistentVolumeClaim, V1Pod, V1Volume } from "../cluster/kube-models.ts";
import {
  applyHostPathType,
  emptyDirPath,
  failedMountMessage,
  setUpPodVolumes,
  type VolumeLookups,
} from "./pod-volumes.ts";

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "kvt-pod-volumes-"));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const pod = (volumes: V1Volume[]): V1Pod => ({
  metadata: { name: "p", namespace: "ns", uid: "u" },
  spec: { containers: [{ name: "c", volumeMounts: [{ name: "data", mountPath: "/data", subPath: "sub" }] }], volumes },
});
const lookups = (claim?: V1PersistentVolumeClaim, volume?: V1PersistentVolume): VolumeLookups => ({
  claim: () => Promise.resolve(claim),
  volume: () => Promise.resolve(volume),
  configMap: () => Promise.resolve(undefined),
  secret: () => Promise.resolve(undefined),
  serviceAccount: () => Promise.resolve(undefined),
  token: () => Promise.resolve(undefined),
});
const claim = (phase: string, volumeName?: string): V1PersistentVolumeClaim => ({
  metadata: { name: "data", namespace: "ns", uid: "c1" },
  spec: { volumeName },
  status: { phase },
});
const pv = (path: string): V1PersistentVolume => ({
  metadata: { name: "pv1" },
  spec: { hostPath: { path, type: "DirectoryOrCreate" }, claimRef: { uid: "c1" } },
});
const pvcVolume: V1Volume = { name: "data", persistentVolumeClaim: { claimName: "data", readOnly: true } };

describe("setUpPodVolumes() image volumes", () => {
  const imagePod = (reference: string): V1Pod => ({
    metadata: { name: "p", namespace: "ns", uid: "u" },
    spec: {
      containers: [{ name: "c", volumeMounts: [{ name: "disk", mountPath: "/img", readOnly: true, subPath: "boot" }] }],
      volumes: [{ name: "disk", image: { reference, pullPolicy: "Always" } }],
    },
  });

  it("maps an image volume to the image's directory in the local store, read-only, making no subPath", async () => {
    const store = join(dir, "store");
    const image = join(store, "local", "test-guest", "latest");
    mkdirSync(image, { recursive: true });
    writeFileSync(join(image, "image.json"), '{"schemaVersion":1,"kernel":"test-guest.elf"}');
    const r = await setUpPodVolumes(imagePod("local/test-guest:latest"), dir, { ...lookups(), imageStore: store });
    expect(r).toEqual({ ready: new Map([["disk", { hostPath: image, readOnly: true }]]) });
    expect(existsSync(join(image, "boot"))).toBe(false);
  });

  it("keeps the pod waiting, in the kubelet's words, for an image the store lacks or a bad reference", async () => {
    const store = join(dir, "store");
    expect(await setUpPodVolumes(imagePod("local/absent:v1"), dir, { ...lookups(), imageStore: store })).toEqual({
      failed: [
        {
          volume: "disk",
          message: `Failed to pull image "local/absent:v1": image is not in the local image store ${store}`,
        },
      ],
    });
    const bad = await setUpPodVolumes(imagePod("../../etc"), dir, { ...lookups(), imageStore: store });
    expect(bad).toEqual({
      failed: [
        {
          volume: "disk",
          message: expect.stringMatching(/^Failed to pull image "..\/..\/etc": invalid image reference/),
        },
      ],
    });
  });
});

describe("setUpPodVolumes()", () => {
  it("waits for a claim that is missing or not bound, in the kubelet's words", async () => {
    expect(await setUpPodVolumes(pod([pvcVolume]), dir, lookups())).toEqual({
      failed: [{ volume: "data", message: 'error processing PVC ns/data: persistentvolumeclaim "data" not found' }],
    });
    expect(await setUpPodVolumes(pod([pvcVolume]), dir, lookups(claim("Pending")))).toEqual({
      failed: [{ volume: "data", message: "error processing PVC ns/data: PVC is not bound" }],
    });
    expect(await setUpPodVolumes(pod([pvcVolume]), dir, lookups(claim("Bound", "pv1")))).toEqual({
      failed: [
        {
          volume: "data",
          message: 'failed to fetch PV pv1 from API server: persistentvolume "pv1" not found',
        },
      ],
    });
  });

  it("resolves a bound claim to its PV's directory (made when DirectoryOrCreate), read-only as the source says", async () => {
    const path = join(dir, "pv1");
    const r = await setUpPodVolumes(pod([pvcVolume]), dir, lookups(claim("Bound", "pv1"), pv(path)));
    expect(r).toEqual({ ready: new Map([["data", { hostPath: path, readOnly: true }]]) });
    expect(statSync(join(path, "sub")).isDirectory()).toBe(true); // the mount's subPath
  });

  it("makes emptyDir volumes under the pod directory", async () => {
    const r = await setUpPodVolumes(pod([{ name: "data", emptyDir: {} }]), dir, lookups());
    expect(r).toEqual({ ready: new Map([["data", { hostPath: emptyDirPath(dir, "data"), readOnly: false }]]) });
    expect(existsSync(emptyDirPath(dir, "data"))).toBe(true);
  });

  it("lays emptyDirs out as kubelet does and tells containers their path through the pod directory's link", async () => {
    const real = join(dir, "pods", "uid-1");
    mkdirSync(real, { recursive: true });
    symlinkSync(join(dir, "pods"), join(dir, "short"));
    const linked = join(dir, "short", "uid-1");
    const r = await setUpPodVolumes(pod([{ name: "sockets", emptyDir: {} }]), real, lookups(), linked);
    const told = join(linked, "volumes", "kubernetes.io~empty-dir", "sockets");
    expect(r).toEqual({ ready: new Map([["sockets", { hostPath: told, readOnly: false }]]) });
    expect(realpathSync(told)).toBe(
      join(realpathSync(dir), "pods", "uid-1", "volumes/kubernetes.io~empty-dir/sockets"),
    );
  });

  it("makes a configMap volume's directory, read-only; a missing ConfigMap fails the pod's volumes", async () => {
    const withConfigMap: VolumeLookups = {
      ...lookups(),
      configMap: (_ns, name) => Promise.resolve(name === "cfg" ? { data: { k: "v" } } : undefined),
    };
    const r = await setUpPodVolumes(pod([{ name: "data", configMap: { name: "cfg" } }]), dir, withConfigMap);
    const path = join(dir, "volumes", "kubernetes.io~configmap", "data");
    expect(r).toEqual({ ready: new Map([["data", { hostPath: path, readOnly: true }]]) });
    expect(readFileSync(join(path, "k"), "utf8")).toBe("v");
    // The container's subPath "sub" names a key of the ConfigMap: nothing is made inside the volume.
    expect(existsSync(join(path, "sub"))).toBe(false);
    const missing = await setUpPodVolumes(pod([{ name: "data", configMap: { name: "nope" } }]), dir, withConfigMap);
    expect(missing).toEqual({
      failed: [{ volume: "data", message: 'MountVolume.SetUp failed for volume "data" : configmap "nope" not found' }],
    });
  });

  it("checks a hostPath volume's type", async () => {
    const file = join(dir, "f");
    writeFileSync(file, "");
    const r = await setUpPodVolumes(
      pod([{ name: "data", hostPath: { path: file, type: "Directory" } }]),
      dir,
      lookups(),
    );
    expect(r).toEqual({
      failed: [
        {
          volume: "data",
          message: `MountVolume.SetUp failed for volume "data" : hostPath type check failed: ${file} is not a directory`,
        },
      ],
    });
    expect(failedMountMessage("failed" in r ? r.failed : [])).toBe(
      `Unable to attach or mount volumes: unmounted volumes=[data], unattached volumes=[], failed to process volumes=[data]: MountVolume.SetUp failed for volume "data" : hostPath type check failed: ${file} is not a directory`,
    );
  });
});

/** Some block device node of this machine (e.g. /dev/loop0: the node exists whether or not it is attached). */
const someBlockDevice = readdirSync("/dev")
  .map((n) => join("/dev", n))
  .find((p) => {
    try {
      return statSync(p).isBlockDevice();
    } catch {
      return false;
    }
  });

describe("setUpPodVolumes() with Block claims", () => {
  const blockPv = (path: string, mode = "Block"): V1PersistentVolume => ({
    metadata: { name: "pv1" },
    spec: { volumeMode: mode, local: { path }, claimRef: { uid: "c1" } },
  });
  const using = (use: "volumeMounts" | "volumeDevices"): V1Pod => ({
    metadata: { name: "p", namespace: "ns", uid: "u" },
    spec: {
      containers: [
        use === "volumeMounts"
          ? { name: "c", volumeMounts: [{ name: "data", mountPath: "/data" }] }
          : { name: "c", volumeDevices: [{ name: "data", devicePath: "/dev/data" }] },
      ],
      volumes: [{ name: "data", persistentVolumeClaim: { claimName: "data" } }],
    },
  });

  it.runIf(someBlockDevice !== undefined)(
    "resolves a Block claim to its device, through the PV's link, for volumeDevices",
    async () => {
      const link = join(dir, "pv1-link");
      symlinkSync(someBlockDevice!, link);
      const r = await setUpPodVolumes(using("volumeDevices"), dir, lookups(claim("Bound", "pv1"), blockPv(link)));
      expect(r).toEqual({ ready: new Map([["data", { hostPath: someBlockDevice, readOnly: false, block: true }]]) });
    },
  );

  it("refuses a volumeMode that does not match the containers' use, in kubelet's words", async () => {
    const link = join(dir, "pv1-link");
    expect(await setUpPodVolumes(using("volumeMounts"), dir, lookups(claim("Bound", "pv1"), blockPv(link)))).toEqual({
      failed: [{ volume: "data", message: "volume data has volumeMode Block, but is specified in volumeMounts" }],
    });
    const fs = blockPv(dir, "Filesystem");
    expect(await setUpPodVolumes(using("volumeDevices"), dir, lookups(claim("Bound", "pv1"), fs))).toEqual({
      failed: [{ volume: "data", message: "volume data has volumeMode Filesystem, but is specified in volumeDevices" }],
    });
  });

  it("refuses a Block PV whose path is not a block device, or is missing", async () => {
    const file = join(dir, "plain");
    writeFileSync(file, "");
    expect(await setUpPodVolumes(using("volumeDevices"), dir, lookups(claim("Bound", "pv1"), blockPv(file)))).toEqual({
      failed: [
        { volume: "data", message: `MapVolume.MapPodDevice failed for volume "pv1" : ${file} is not a block device` },
      ],
    });
    const gone = join(dir, "gone");
    expect(await setUpPodVolumes(using("volumeDevices"), dir, lookups(claim("Bound", "pv1"), blockPv(gone)))).toEqual({
      failed: [
        { volume: "data", message: `MapVolume.MapPodDevice failed for volume "pv1" : path ${gone} does not exist` },
      ],
    });
  });
});

describe("applyHostPathType()", () => {
  it.each([
    ["DirectoryOrCreate", "d/e", undefined, "directory"],
    ["FileOrCreate", "new-file", undefined, "file"],
    ["File", "absent", "is not a file", undefined],
    ["Socket", "absent", "is not a socket file", undefined],
    ["", "absent", undefined, undefined],
  ])("type %j on %s", (type, name, error, made) => {
    const path = join(dir, name);
    const out = applyHostPathType(path, type);
    if (error) expect(out).toBe(`hostPath type check failed: ${path} ${error}`);
    else expect(out).toBeUndefined();
    if (made === "directory") expect(statSync(path).isDirectory()).toBe(true);
    if (made === "file") expect(statSync(path).isFile()).toBe(true);
  });

  it("does not create a missing parent for FileOrCreate", () => {
    expect(applyHostPathType(join(dir, "no", "file"), "FileOrCreate")).toMatch(
      /^hostPath type check failed: cannot create file/,
    );
  });
});
