import { existsSync, lstatSync, mkdirSync, mkdtempSync, readlinkSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { makePodsLink, podsLinkPath, removePodsLink } from "./pods-link.ts";

let dir = "";
afterEach(() => {
  if (dir) {
    removePodsLink(join(dir, "node01"));
    rmSync(dir, { recursive: true, force: true });
  }
});

describe("the pods directory's short link", () => {
  it("is short enough for a launcher socket under it, and the same for the same node directory", () => {
    const link = podsLinkPath("/some/long/cluster/data/directory/nodes/node01");
    expect(link).toMatch(/^\/tmp\/kvt[0-9a-z]{5}$/);
    expect(podsLinkPath("/some/long/cluster/data/directory/nodes/node01/")).toBe(link);
    expect(podsLinkPath("/some/long/cluster/data/directory/nodes/node02")).not.toBe(link);
    // The launcher's socket and QEMU's longest one in the private emptyDir fit a unix socket path (107 bytes).
    const pod = join(link, "6f0c2a1e-8d3b-4c55-9e0a-0123456789ab", "volumes/kubernetes.io~empty-dir");
    for (const socket of ["sockets/launcher-sock", "private/migrate-out.sock"])
      expect(Buffer.byteLength(join(pod, socket))).toBeLessThanOrEqual(107);
  });

  it("points at the node's pods directory while the kubelet runs, and is removed at stop", () => {
    dir = mkdtempSync(join(tmpdir(), "kvt-pods-link-"));
    const node = join(dir, "node01");
    mkdirSync(join(node, "pods", "uid-1"), { recursive: true });
    const link = makePodsLink(node);
    expect(readlinkSync(link)).toBe(join(node, "pods"));
    expect(existsSync(join(link, "uid-1"))).toBe(true);
    expect(makePodsLink(node)).toBe(link); // a restarted kubelet keeps it
    removePodsLink(node);
    expect(() => lstatSync(link)).toThrow();
  });

  it("removes links of nodes whose directory is gone, and never a path that is not such a link", () => {
    dir = mkdtempSync(join(tmpdir(), "kvt-pods-link-"));
    const gone = join(dir, "gone");
    mkdirSync(join(gone, "pods"), { recursive: true });
    const stale = makePodsLink(gone);
    rmSync(gone, { recursive: true });
    const node = join(dir, "node01");
    mkdirSync(join(node, "pods"), { recursive: true });
    makePodsLink(node);
    expect(() => lstatSync(stale)).toThrow();
  });

  it("never repoints the link of another node that exists", () => {
    dir = mkdtempSync(join(tmpdir(), "kvt-pods-link-"));
    const node = join(dir, "node01");
    mkdirSync(join(node, "pods"), { recursive: true });
    const link = podsLinkPath(node);
    symlinkSync(dir, link); // a colliding node's link, its directory alive
    try {
      expect(() => makePodsLink(node)).toThrow(/links another node's/);
      expect(readlinkSync(link)).toBe(dir);
    } finally {
      rmSync(link, { force: true });
    }
  });

  it("refuses to replace a path that is not a symlink", () => {
    dir = mkdtempSync(join(tmpdir(), "kvt-pods-link-"));
    const node = join(dir, "node01");
    mkdirSync(join(node, "pods"), { recursive: true });
    const link = podsLinkPath(node);
    mkdirSync(link);
    try {
      expect(() => makePodsLink(node)).toThrow(/the path is taken/);
    } finally {
      rmSync(link, { recursive: true });
    }
  });
});
