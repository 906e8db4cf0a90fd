import { describe, expect, it } from "vitest";
import { launcherDirs } from "./launcher-dirs.ts";

const UID = "0b7c6a5e-1111-4222-8333-944445555666";
const pod = "/tmp/kvtabcde/6f0c2a1e-8d3b-4c55-9e0a-0123456789ab/volumes/kubernetes.io~empty-dir";
const mounts = [
  { mountPath: "/var/run/kubevirt-private", hostPath: `${pod}/private` },
  { mountPath: "/var/run/kubevirt/sockets", hostPath: `${pod}/sockets` },
  { mountPath: "/var/run/kubevirt-private/vmi-disks/data", hostPath: "/storage/pv1" },
];
const never = (): boolean => false;

describe("launcherDirs()", () => {
  it("finds the socket and private directories among the pod's mounts (KVT_VOLUME_MOUNTS)", () => {
    expect(launcherDirs(mounts, true, { vmiUid: UID }, never)).toEqual({
      socketDir: `${pod}/sockets`,
      socketPath: `${pod}/sockets/launcher-sock`,
      inPod: true,
      workDir: `${pod}/private`,
      consoleLog: `${pod}/private/${UID}/virt-serial0-log`,
    });
  });

  it("prefers the pod's mounts to the flags, and falls back to the flags for what is not mounted", () => {
    const flags = { socketDir: "/run/sockets", podDir: "/run/pod", vmiUid: UID, podUid: "6f0c2a1e-8d3b-4c55" };
    expect(launcherDirs(mounts, true, flags, never)).toMatchObject({ socketDir: `${pod}/sockets`, inPod: true });
    expect(launcherDirs([], true, flags, never)).toEqual({
      socketDir: "/run/sockets",
      socketPath: "/run/sockets/launcher-6f0c2a1e8d3b4c55.sock",
      inPod: false,
      workDir: "/run/pod",
      consoleLog: "/run/pod/virt-serial0-log",
    });
  });

  it("uses the real paths on a node without a mount table, unless flags name directories", () => {
    const always = (): boolean => true;
    expect(launcherDirs([], false, { vmiUid: UID }, always)).toEqual({
      socketDir: "/var/run/kubevirt/sockets",
      socketPath: "/var/run/kubevirt/sockets/launcher-sock",
      inPod: true,
      workDir: "/var/run/kubevirt-private",
      consoleLog: `/var/run/kubevirt-private/${UID}/virt-serial0-log`,
    });
    expect(launcherDirs([], false, { socketDir: "/s", podDir: "/p", vmiUid: UID }, always)).toMatchObject({
      socketDir: "/s",
      inPod: false,
      workDir: "/p",
    });
  });

  it("runs by hand without flags in a temporary directory and keeps the socket there", () => {
    const dirs = launcherDirs([], false, { vmiUid: UID }, never);
    expect(dirs.workDir).toMatch(new RegExp(`virt-launcher-${UID}$`));
    expect(dirs).toMatchObject({ socketDir: dirs.workDir, inPod: false });
    expect(dirs.consoleLog).toBeUndefined();
  });

  it("never builds the console log path from a uid that is not a plain name", () => {
    expect(launcherDirs(mounts, true, { vmiUid: "../../etc" }, never).consoleLog).toBe(
      `${pod}/private/virt-serial0-log`,
    );
  });
});
