import { describe, expect, it } from "vitest";
import type { V1Pod } from "../cluster/kube-models.ts";
import {
  nodeTracingEnv,
  planContainer,
  type ResolvedVolume,
  VOLUME_MOUNTS_ENV,
  volumeDevices,
  volumeMounts,
} from "./container-spec.ts";

const layout = { projectRoot: "/repo", execPath: "/usr/bin/node", execArgs: [] };
const pod: V1Pod = {
  metadata: { name: "virt-launcher-vm-x", namespace: "ns1", uid: "u1" },
  spec: { nodeName: "node01", containers: [] },
};

describe("planContainer()", () => {
  it("maps the launcher command to the virt-launcher entry point with its flags and downward-API env", () => {
    const plan = planContainer(
      pod,
      {
        name: "compute",
        image: "kubevirt/virt-launcher:v1",
        command: ["/usr/bin/virt-launcher-monitor", "--name", "vm-x"],
        args: ["--namespace", "ns1"],
        env: [
          { name: "A", value: "1" },
          { name: "POD", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } },
        ],
      },
      "/data/pods/u1",
      layout,
    );
    expect(plan).toMatchObject({
      kind: "process",
      argv: ["/usr/bin/node", "/repo/apps/virt-launcher/src/main.ts", "--name", "vm-x", "--namespace", "ns1"],
      env: {
        A: "1",
        POD: "virt-launcher-vm-x",
        NODE_NAME: "node01",
        POD_UID: "u1",
      },
    });
  });

  it("injects no socket or pod directory: the launcher finds them among its mounts", () => {
    const plan = planContainer(pod, { name: "compute", command: ["virt-launcher"] }, "/data/pods/u1", layout);
    const env = plan.kind === "process" ? plan.env : {};
    expect(Object.keys(env).filter((k) => k.startsWith("KUBEVIRT_"))).toEqual([]);
  });

  it("maps virt-tail to following the named file inside the emptyDir the container mounts there", () => {
    const withPrivate: V1Pod = { ...pod, spec: { ...pod.spec!, volumes: [{ name: "private", emptyDir: {} }] } };
    const plan = planContainer(
      withPrivate,
      {
        name: "guest-console-log",
        command: ["/usr/bin/virt-tail", "--logfile", "/var/run/kubevirt-private/vmi-1/virt-serial0-log"],
        volumeMounts: [{ name: "private", mountPath: "/var/run/kubevirt-private", readOnly: true }],
      },
      "/data/pods/u1",
      layout,
    );
    expect(plan).toEqual({
      kind: "tail",
      name: "guest-console-log",
      file: "/data/pods/u1/volumes/kubernetes.io~empty-dir/private/vmi-1/virt-serial0-log",
    });
  });

  it("looks for a virt-tail file outside every emptyDir mount in the pod directory, never above it", () => {
    const tail = (logfile: string, mounts = [{ name: "private", mountPath: "/var/run/kubevirt-private" }]) =>
      planContainer(
        { ...pod, spec: { ...pod.spec!, volumes: [{ name: "private", emptyDir: {} }] } },
        { name: "log", command: ["virt-tail", "--logfile", logfile], volumeMounts: mounts },
        "/data/pods/u1",
        layout,
      );
    expect(tail("/var/log/serial0.log")).toMatchObject({ file: "/data/pods/u1/serial0.log" });
    expect(tail("/var/run/kubevirt-private/../../etc/shadow")).toMatchObject({ file: "/data/pods/u1/shadow" });
    expect(tail("/var/run/kubevirt-private/x", [])).toMatchObject({ file: "/data/pods/u1/x" });
  });

  it("refuses other images with ErrImagePull and says what it can run", () => {
    const plan = planContainer(pod, { name: "web", image: "nginx", command: ["nginx"] }, "/d", layout);
    expect(plan).toMatchObject({ kind: "unrunnable", reason: "ErrImagePull" });
    expect(plan.kind === "unrunnable" && plan.message).toMatch(
      /image "nginx" .* not available .* virt-launcher and virt-tail/,
    );
  });

  it("gives launcher processes the node's compile cache when the layout names one", () => {
    const plan = planContainer(
      pod,
      { name: "compute", image: "kubevirt/virt-launcher:v1", command: ["virt-launcher"] },
      "/data/pods/u1",
      { ...layout, compileCacheDir: "/data/compile-cache" },
    );
    expect(plan).toMatchObject({ kind: "process", env: { NODE_COMPILE_CACHE: "/data/compile-cache" } });
    expect(planContainer(pod, { name: "compute", command: ["virt-launcher"] }, "/d", layout)).not.toHaveProperty(
      "env.NODE_COMPILE_CACHE",
    );
  });

  it.each([
    [undefined, 19],
    ["100m", 10],
    ["250m", 6],
    ["1", 0],
    ["2", 0],
    ["0.5", 3],
  ])("runs a container requesting cpu %s at nice %i (its cgroup weight)", (request, nice) => {
    const plan = planContainer(
      pod,
      {
        name: "compute",
        command: ["virt-launcher"],
        ...(request ? { resources: { requests: { cpu: request } } } : {}),
      },
      "/d",
      layout,
    );
    expect(plan).toMatchObject({ kind: "process", nice });
  });
});

describe("nodeTracingEnv", () => {
  it("passes the node's trace file and OTEL_* settings to containers, nothing else", () => {
    expect(
      nodeTracingEnv({ KUBEVIRT_TRACES_FILE: "/t.jsonl", OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", SECRET: "x" }),
    ).toEqual({ KUBEVIRT_TRACES_FILE: "/t.jsonl", OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318" });
  });
});

describe("KVT_VOLUME_MOUNTS", () => {
  const volumes = new Map([
    ["disk", { hostPath: "/data/storage/pvc-1_ns1_disk", readOnly: false }],
    ["ro-claim", { hostPath: "/data/storage/pvc-2_ns1_ro", readOnly: true }],
    ["scratch", { hostPath: "/data/pods/u1/volumes/kubernetes.io~empty-dir/scratch", readOnly: false }],
  ]);

  it("lists each mount of the container with its host path, subPath and read-only flag, in order", () => {
    const container = {
      name: "compute",
      volumeMounts: [
        { name: "scratch", mountPath: "/var/run/kubevirt-ephemeral-disks" },
        { name: "disk", mountPath: "/var/run/kubevirt-private/vmi-disks/disk", readOnly: true },
        { name: "disk", mountPath: "/logs", subPath: "logs" },
        { name: "ro-claim", mountPath: "/ro" },
        { name: "configmap", mountPath: "/not-provided" },
      ],
    };
    expect(volumeMounts(container, volumes)).toEqual([
      {
        mountPath: "/var/run/kubevirt-ephemeral-disks",
        hostPath: "/data/pods/u1/volumes/kubernetes.io~empty-dir/scratch",
        readOnly: false,
      },
      {
        mountPath: "/var/run/kubevirt-private/vmi-disks/disk",
        hostPath: "/data/storage/pvc-1_ns1_disk",
        readOnly: true,
      },
      { mountPath: "/logs", hostPath: "/data/storage/pvc-1_ns1_disk/logs", readOnly: false },
      { mountPath: "/ro", hostPath: "/data/storage/pvc-2_ns1_ro", readOnly: true },
    ]);
  });

  it("is in every launcher process's env, [] for a container without mounts", () => {
    const container = {
      name: "compute",
      command: ["virt-launcher-monitor"],
      volumeMounts: [{ name: "disk", mountPath: "/disk" }],
    };
    const plan = planContainer(pod, container, "/data/pods/u1", layout, volumes);
    expect(plan.kind === "process" && JSON.parse(plan.env[VOLUME_MOUNTS_ENV])).toEqual([
      { mountPath: "/disk", hostPath: "/data/storage/pvc-1_ns1_disk", readOnly: false },
    ]);
    const bare = planContainer(pod, { name: "c", command: ["virt-launcher"] }, "/data/pods/u1", layout);
    expect(bare.kind === "process" && bare.env[VOLUME_MOUNTS_ENV]).toBe("[]");
  });

  it("follows the mounts with each volumeDevice of a Block volume: devicePath -> the host's device node", () => {
    const withBlock = new Map<string, ResolvedVolume>([
      ...volumes,
      ["raw", { hostPath: "/dev/loop7", readOnly: false, block: true }],
      ["raw-ro", { hostPath: "/dev/loop8", readOnly: true, block: true }],
    ]);
    const container = {
      name: "compute",
      command: ["virt-launcher-monitor"],
      volumeMounts: [
        { name: "disk", mountPath: "/disk" },
        { name: "raw", mountPath: "/never" }, // refused before containers start (pod-volumes.ts); never listed
      ],
      volumeDevices: [
        { name: "raw", devicePath: "/dev/raw" },
        { name: "raw-ro", devicePath: "/dev/raw-ro" },
        { name: "disk", devicePath: "/dev/not-a-block-volume" },
      ],
    };
    expect(volumeDevices(container, withBlock)).toEqual([
      { mountPath: "/dev/raw", hostPath: "/dev/loop7", readOnly: false },
      { mountPath: "/dev/raw-ro", hostPath: "/dev/loop8", readOnly: true },
    ]);
    const plan = planContainer(pod, container, "/data/pods/u1", layout, withBlock);
    expect(plan.kind === "process" && JSON.parse(plan.env[VOLUME_MOUNTS_ENV])).toEqual([
      { mountPath: "/disk", hostPath: "/data/storage/pvc-1_ns1_disk", readOnly: false },
      { mountPath: "/dev/raw", hostPath: "/dev/loop7", readOnly: false },
      { mountPath: "/dev/raw-ro", hostPath: "/dev/loop8", readOnly: true },
    ]);
  });
});
