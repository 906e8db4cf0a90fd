import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import {
  cgroupHierarchies,
  mountsUnder,
  nodeCgroupRoot,
  nodeRunDir,
  parseMountInfo,
  removeCniResults,
} from "./node-host.ts";

const MOUNTINFO = [
  "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw",
  "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory",
  "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw",
  "90 27 254:0 /d/nodes/node01/kubelet /d/nodes/node01/kubelet rw shared:5 - ext4 /dev/vda rw",
  "91 90 0:50 / /d/nodes/node01/kubelet/pods/u/volumes/kubernetes.io~projected/kube-api-access rw - tmpfs tmpfs rw",
  "92 27 0:51 / /run/kvtk-abc/node01/containerd/io.containerd.runtime.v2.task/k8s.io/c1/rootfs rw - overlay overlay rw",
  "93 27 0:4 net:[4026532178] /run/kvtk-abc/node01/containerd/netns/cni-1 rw - nsfs nsfs rw",
  "94 27 0:52 / /d/nodes/node010/x rw - tmpfs tmpfs rw",
  "95 27 0:53 / /d/with\\040space rw - tmpfs tmpfs rw",
].join("\n");

describe("mount bookkeeping", () => {
  const mounts = parseMountInfo(MOUNTINFO);

  it("reads mount points and types, decoding octal escapes", () => {
    expect(mounts).toHaveLength(9);
    expect(mounts[8]).toEqual({ path: "/d/with space", fsType: "tmpfs" });
    expect(cgroupHierarchies(mounts)).toEqual(["/sys/fs/cgroup/memory", "/sys/fs/cgroup/unified"]);
  });

  it("lists a node's mounts deepest first, and not a sibling's that shares a prefix", () => {
    expect(mountsUnder(mounts, ["/d/nodes/node01", "/run/kvtk-abc/node01"])).toEqual([
      "/d/nodes/node01/kubelet/pods/u/volumes/kubernetes.io~projected/kube-api-access",
      "/run/kvtk-abc/node01/containerd/io.containerd.runtime.v2.task/k8s.io/c1/rootfs",
      "/run/kvtk-abc/node01/containerd/netns/cni-1",
      "/d/nodes/node01/kubelet",
    ]);
  });

  it("names a node's cgroup root and run directory after the bridge", () => {
    expect(nodeCgroupRoot({ bridge: "kvtk-abc" }, { name: "node01" })).toBe("/kvtk-abc-node01");
    expect(nodeRunDir({ bridge: "kvtk-abc" }, { name: "node01" })).toBe("/run/kvtk-abc/node01");
  });
});

describe("removeCniResults", () => {
  const dir = mkdtempSync(join(tmpdir(), "kube-cni-results-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("removes this network's results and its sandboxes' loopback results, nothing else", () => {
    const ours = "a".repeat(64);
    const theirs = "b".repeat(64);
    mkdirSync(dir, { recursive: true });
    for (const f of [
      `kvtk-abc-${ours}-eth0`,
      `cni-loopback-${ours}-lo`,
      `kvt-pod-network-${theirs}-eth0`,
      `cni-loopback-${theirs}-lo`,
    ]) {
      writeFileSync(join(dir, f), "{}");
    }
    removeCniResults(dir, "kvtk-abc");
    expect(readdirSync(dir).sort()).toEqual([`cni-loopback-${theirs}-lo`, `kvt-pod-network-${theirs}-eth0`]);
  });
});
