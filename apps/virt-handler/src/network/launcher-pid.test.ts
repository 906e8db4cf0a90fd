import { linkSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { findLauncherPid, podUidOfCgroup, uidOfStatus } from "./launcher-pid.ts";

const UID = "3f0e9a52-7c1d-4b8e-9f2a-5d6c7b8a9e01";

describe("podUidOfCgroup()", () => {
  it.each([
    ["cgroup v1, cgroupfs driver", `12:memory:/kvtk-1a2b-node01/kubepods/besteffort/pod${UID}/0123abcd\n`, UID],
    ["cgroup v2, cgroupfs driver", `0::/kubepods/burstable/pod${UID}/cafe\n`, UID],
    [
      "systemd driver (dashes become underscores)",
      `0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod${UID.replaceAll("-", "_")}.slice/cri-containerd-ab.scope\n`,
      UID,
    ],
    ["a host process", "0::/user.slice/user-0.slice/session-1.scope\n", undefined],
    ["the kubelet's own slice", "0::/kubepods.slice\n", undefined],
  ])("%s", (_what, text, expected) => {
    expect(podUidOfCgroup(text)).toBe(expected);
  });
});

it("uidOfStatus() reads the real uid", () => {
  expect(uidOfStatus("Name:\tnode\nUid:\t107\t107\t107\t107\nGid:\t107\n")).toBe(107);
  expect(uidOfStatus("Name:\tnode\n")).toBeUndefined();
});

describe("findLauncherPid()", () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  /**
   * A /proc stand-in: pid 10 is the pod's sandbox (same pod, no socket), 20 another pod's launcher (its socket is
   * another file), 30 the launcher (its root holds the handler's socket: the same inode), 40 a host process.
   */
  function procTree(): { procRoot: string; socketOnNode: string } {
    const base = mkdtempSync(join(tmpdir(), "kvt-proc-"));
    dirs.push(base);
    const socketOnNode = join(base, "pods", UID, "launcher-sock");
    mkdirSync(join(base, "pods", UID), { recursive: true });
    writeFileSync(socketOnNode, "");
    const procRoot = join(base, "proc");
    const pid = (n: number, cgroup: string, socket?: "same" | "other"): void => {
      const dir = join(procRoot, String(n));
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, "cgroup"), cgroup);
      const rootfs = join(base, `rootfs-${n}`);
      mkdirSync(join(rootfs, "var/run/kubevirt/sockets"), { recursive: true });
      const inPod = join(rootfs, "var/run/kubevirt/sockets/launcher-sock");
      if (socket === "same") linkSync(socketOnNode, inPod);
      if (socket === "other") writeFileSync(inPod, "");
      symlinkSync(rootfs, join(dir, "root"));
    };
    pid(10, `0::/kubepods/besteffort/pod${UID}/pause\n`);
    pid(20, "0::/kubepods/besteffort/pod11111111-2222-3333-4444-555555555555/c\n", "other");
    pid(30, `0::/kubepods/besteffort/pod${UID}/compute\n`, "same");
    pid(40, "0::/user.slice\n", "same");
    mkdirSync(join(procRoot, "self"));
    return { procRoot, socketOnNode };
  }

  it("finds the process of the pod whose root holds the very socket the handler talks to", async () => {
    const { procRoot, socketOnNode } = procTree();
    const query = { podUid: UID, socketOnNode, socketInPod: "/var/run/kubevirt/sockets/launcher-sock", procRoot };
    expect(await findLauncherPid(query)).toBe(30);
  });

  it("finds none for a pod with no process here (not hostPID, or the launcher exited)", async () => {
    const { procRoot, socketOnNode } = procTree();
    const query = {
      podUid: "99999999-2222-3333-4444-555555555555",
      socketOnNode,
      socketInPod: "/var/run/kubevirt/sockets/launcher-sock",
      procRoot,
    };
    expect(await findLauncherPid(query)).toBeUndefined();
  });

  it("rejects when the handler's own view of the socket is gone", async () => {
    const { procRoot } = procTree();
    const query = { podUid: UID, socketOnNode: "/nonexistent/sock", socketInPod: "/x", procRoot };
    await expect(findLauncherPid(query)).rejects.toThrow(/ENOENT/);
  });
});
