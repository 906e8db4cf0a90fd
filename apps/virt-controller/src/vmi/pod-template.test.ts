import type { PersistentVolumeClaimInfo } from "@kvt/api";
import { newVmi, withMemory } from "@kvt/testing";
import { describe, expect, it } from "vitest";
import { accessCredentialSecrets, renderLauncherPod } from "./pod-template.ts";

/** The compute container's own mounts, first, in KubeVirt's order. */
const LAUNCHER_DIRS = ["private", "ephemeral-disks", "sockets"];

describe("launcher pod directories (KubeVirt's VolumeRenderer)", () => {
  const vmi = newVmi("vm-dirs", withMemory("64Mi"), (v) => {
    v.metadata!.uid = "0b7c6a5e-1111-4222-8333-944445555666";
  });
  const pod = renderLauncherPod(vmi);
  const [compute, consoleLog] = pod.spec!.containers;

  it("declares the private, sockets and ephemeral-disks emptyDirs with KubeVirt's names", () => {
    expect(pod.spec?.volumes).toEqual([
      { name: "private", emptyDir: {} },
      { name: "sockets", emptyDir: {} },
      { name: "ephemeral-disks", emptyDir: {} },
    ]);
  });

  it("mounts them in the compute container at KubeVirt's paths, the sockets where virt-handler looks", () => {
    expect(compute.volumeMounts).toEqual([
      { name: "private", mountPath: "/var/run/kubevirt-private" },
      { name: "ephemeral-disks", mountPath: "/var/run/kubevirt-ephemeral-disks" },
      { name: "sockets", mountPath: "/var/run/kubevirt/sockets" },
    ]);
  });

  it("gives guest-console-log the private volume read-only, where the launcher writes the console log", () => {
    expect(consoleLog.volumeMounts).toEqual([
      { name: "private", mountPath: "/var/run/kubevirt-private", readOnly: true },
    ]);
    expect(consoleLog.command).toEqual([
      "/usr/bin/virt-tail",
      "--logfile",
      "/var/run/kubevirt-private/0b7c6a5e-1111-4222-8333-944445555666/virt-serial0-log",
    ]);
  });

  it("injects nothing a special kubelet would have to provide: no hostPath, no socket or pod dir env", () => {
    expect(pod.spec?.volumes?.some((v) => v.hostPath)).toBe(false);
    const env = (compute.env ?? []).map((e) => e.name);
    expect(env.filter((n) => n.startsWith("KUBEVIRT_") && n !== "KUBEVIRT_USE_EMULATION")).toEqual([]);
  });

  it("gives the compute container its pod IP through the downward API (where an incoming migration listens)", () => {
    // A real kubelet resolves status.podIP to the pod's sandbox address; the process-kubelet does the same for a
    // sandboxed pod and drops POD_IP for one without a sandbox (kubelet-network.test.ts).
    expect(compute.env?.find((e) => e.name === "POD_IP")).toEqual({
      name: "POD_IP",
      valueFrom: { fieldRef: { fieldPath: "status.podIP" } },
    });
  });
});

describe("the launcher image", () => {
  const vmi = newVmi("vm-image", withMemory("64Mi"));
  it("is kubevirt/virt-launcher by default (the local cluster's process-kubelet runs it from the checkout)", () => {
    expect(renderLauncherPod(vmi).spec!.containers.map((c) => c.image)).toEqual([
      "kubevirt/virt-launcher",
      "kubevirt/virt-launcher",
    ]);
  });
  it("is --launcher-image's for both containers when given (the release's image)", () => {
    const pod = renderLauncherPod(vmi, { launcherImage: "kubevirt-ts/virt-launcher:0.1.0" });
    expect(pod.spec!.containers.map((c) => [c.name, c.image])).toEqual([
      ["compute", "kubevirt-ts/virt-launcher:0.1.0"],
      ["guest-console-log", "kubevirt-ts/virt-launcher:0.1.0"],
    ]);
  });
});

describe("launcher pod access credentials (KubeVirt's withAccessCredentials)", () => {
  const vmi = newVmi("vm-keys", withMemory("64Mi"), (v) => {
    v.spec.accessCredentials = [
      { sshPublicKey: { source: { secret: { secretName: "my-keys" } }, propagationMethod: { noCloud: {} } } },
      { userPassword: { source: { secret: { secretName: "my-pass" } }, propagationMethod: { qemuGuestAgent: {} } } },
      { sshPublicKey: { source: { secret: { secretName: "my-keys" } }, propagationMethod: { configDrive: {} } } },
    ];
  });

  it("mounts each credential's Secret read-only at <secret>-access-cred, once per Secret", () => {
    expect(accessCredentialSecrets(vmi)).toEqual(["my-keys", "my-pass"]);
    const pod = renderLauncherPod(vmi);
    expect(pod.spec?.volumes?.filter((v) => v.name.endsWith("-access-cred"))).toEqual([
      { name: "my-keys-access-cred", secret: { secretName: "my-keys" } },
      { name: "my-pass-access-cred", secret: { secretName: "my-pass" } },
    ]);
    expect(pod.spec?.containers[0]?.volumeMounts?.filter((m) => m.name.endsWith("-access-cred"))).toEqual([
      {
        name: "my-keys-access-cred",
        mountPath: "/var/run/kubevirt-private/secret/my-keys-access-cred",
        readOnly: true,
      },
      {
        name: "my-pass-access-cred",
        mountPath: "/var/run/kubevirt-private/secret/my-pass-access-cred",
        readOnly: true,
      },
    ]);
  });

  it("renders no such volume without access credentials", () => {
    const pod = renderLauncherPod(newVmi("plain", withMemory("64Mi")));
    expect(pod.spec?.volumes?.some((v) => v.name.endsWith("-access-cred"))).toBe(false);
  });
});

describe("launcher pod storage of claims (KubeVirt's rendervolumes.go addPVCToLaunchManifest)", () => {
  const vmi = newVmi("vm-claims", withMemory("64Mi"), (v) => {
    v.spec.domain.devices.disks = [
      { name: "rootfs", disk: { bus: "virtio" } },
      { name: "data", disk: { bus: "virtio" } },
      { name: "golden", disk: { bus: "virtio" } },
    ];
    v.spec.volumes = [
      { name: "rootfs", persistentVolumeClaim: { claimName: "fs-claim" } },
      { name: "data", persistentVolumeClaim: { claimName: "block-claim", readOnly: true } },
      { name: "golden", ephemeral: { persistentVolumeClaim: { claimName: "block-golden" } } },
    ];
  });
  const modes: Record<string, string> = {
    "fs-claim": "Filesystem",
    "block-claim": "Block",
    "block-golden": "Block",
  };
  const claims = (name: string): PersistentVolumeClaimInfo | undefined =>
    modes[name] ? { claimName: name, volumeMode: modes[name] } : undefined;

  it("maps a Block claim as a volumeDevice at /dev/<volume> and mounts a Filesystem claim's directory", () => {
    const pod = renderLauncherPod(vmi, { claims });
    const compute = pod.spec!.containers[0];
    expect(compute.volumeDevices).toEqual([
      { name: "data", devicePath: "/dev/data" },
      { name: "golden", devicePath: "/dev/golden" },
    ]);
    expect(compute.volumeMounts?.filter((m) => m.mountPath.startsWith("/var/run/kubevirt-private/"))).toEqual([
      { name: "rootfs", mountPath: "/var/run/kubevirt-private/vmi-disks/rootfs" },
    ]);
    // The pod volumes are the claims either way; a readOnly source and an ephemeral volume's claim stay read-only.
    expect(pod.spec!.volumes?.filter((v) => v.persistentVolumeClaim)).toEqual([
      { name: "rootfs", persistentVolumeClaim: { claimName: "fs-claim" } },
      { name: "data", persistentVolumeClaim: { claimName: "block-claim", readOnly: true } },
      { name: "golden", persistentVolumeClaim: { claimName: "block-golden", readOnly: true } },
    ]);
  });

  it("reads the volumeMode from the VMI's volumeStatus when the claim is not in the cache", () => {
    const withStatus = {
      ...vmi,
      status: {
        volumeStatus: [{ name: "data", target: "vdb", persistentVolumeClaimInfo: { volumeMode: "Block" } }],
      },
    } as unknown as typeof vmi;
    const compute = renderLauncherPod(withStatus).spec!.containers[0];
    expect(compute.volumeDevices).toEqual([{ name: "data", devicePath: "/dev/data" }]);
    expect(compute.volumeMounts?.map((m) => m.name)).toEqual([...LAUNCHER_DIRS, "rootfs", "golden"]);
  });

  it("renders no volumeDevices without Block claims", () => {
    const compute = renderLauncherPod(vmi).spec!.containers[0];
    expect(compute.volumeDevices).toBeUndefined();
    expect(compute.volumeMounts?.map((m) => m.name)).toEqual([...LAUNCHER_DIRS, "rootfs", "data", "golden"]);
  });
});
