/**
 * The conntrack deleter against the kernel (root): a throwaway network namespace holding entries made with Debian's
 * `conntrack -I` as kube-proxy's DNAT would leave them (a client's flow to a ClusterIP whose replies come from a pod
 * address), deleted from outside the namespace (nsenter, as virt-handler enters its node's). Only the entries of the
 * named address go; the namespace is removed.
 */
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import { conntrackDeleter } from "./conntrack.ts";

const root = process.getuid?.() === 0;
const made: string[] = [];

function sh(cmd: string, args: string[]): string {
  return execFileSync(cmd, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
}

/** A namespace with a client's flow to 10.96.0.20:80 DNATed to each of `pods` (port 8080). */
function namespaceWithFlows(pods: readonly string[]): string {
  const name = `kvt-ct-test-${randomBytes(3).toString("hex")}`;
  sh("ip", ["netns", "add", name]);
  made.push(name);
  pods.forEach((pod, i) => {
    const sport = String(40_000 + i);
    sh("ip", [
      ...["netns", "exec", name, "conntrack", "-I", "-p", "tcp"],
      ...["-s", "10.70.9.9", "-d", "10.96.0.20", "--sport", sport, "--dport", "80"],
      ...["--reply-src", pod, "--reply-dst", "10.70.9.9", "--reply-port-src", "8080", "--reply-port-dst", sport],
      ...["--state", "ESTABLISHED", "-t", "120"],
    ]);
  });
  return name;
}

/** The reply sources of the namespace's TCP entries (each line: the original tuple's src=, then the reply's). */
function replySources(ns: string): string[] {
  const out = sh("ip", ["netns", "exec", ns, "conntrack", "-L", "-p", "tcp"]);
  const lines = out.split("\n").filter((l) => l.startsWith("tcp"));
  return lines.map((l) => [...l.matchAll(/\bsrc=(\S+)/g)][1]?.[1] ?? "").sort();
}

afterEach(() => {
  for (const ns of made.splice(0)) sh("ip", ["netns", "delete", ns]);
});

describe.runIf(root)("conntrackDeleter against the kernel (root)", () => {
  it("deletes, from outside the namespace, the flows whose replies come from the moved address only", async () => {
    const ns = namespaceWithFlows(["10.70.1.5", "10.70.1.5", "10.70.2.9"]);
    expect(replySources(ns)).toEqual(["10.70.1.5", "10.70.1.5", "10.70.2.9"]);
    const deleteThere = conntrackDeleter(`/run/netns/${ns}`);
    expect(await deleteThere({ replySource: "10.70.1.5" })).toBe(2);
    expect(replySources(ns)).toEqual(["10.70.2.9"]);
    // Nothing left to match: 0, not an error (conntrack exits 1 then).
    expect(await deleteThere({ replySource: "10.70.1.5" })).toBe(0);
  });

  it("narrows to a Service port, and rejects with the tool's message when it cannot run", async () => {
    const ns = namespaceWithFlows(["10.70.1.5"]);
    const deleteThere = conntrackDeleter(`/run/netns/${ns}`);
    const flows = { protocol: "tcp", origDst: "10.96.0.20", replySource: "10.70.1.5" } as const;
    expect(await deleteThere({ ...flows, origDstPort: 81 })).toBe(0);
    expect(await deleteThere({ ...flows, origDstPort: 80 })).toBe(1);
    await expect(conntrackDeleter("/run/netns/kvt-ct-test-absent")({ replySource: "10.70.1.5" })).rejects.toThrow(
      /nsenter .*exited 1/,
    );
  });
});
