/**
 * The disk e2e tests' VM and guest commands: the seed's demo VM with a claim disk (serial DATA) and an emptyDisk
 * (serial SCRATCH); shell lines, typed on its console, that find a disk by its serial and write or read a marker the
 * guest computes (so the typed command's echo never matches the answer).
 */
import { eventually } from "@kvt/testing";
import { expect } from "vitest";
import { inConsole, virtctl } from "./cli.ts";
import { CLUSTER_WAIT } from "./cluster-wait.ts";
import { consoleLog } from "./console-log.ts";
import { demoVm } from "./manifests.ts";
import { type VmiView, vmiOrUndefined } from "./objects.ts";

/** How long a demo guest may take to boot (emulated on a loaded host). */
export const BOOT = { timeoutMs: 240_000, intervalMs: 1000 };
export const MARKER = "kvt-data-4242";

/** The demo VM with a claim disk (serial DATA) and an emptyDisk (serial SCRATCH). */
export function vmWithDisks(name: string, claim: string): Record<string, unknown> {
  const vm = structuredClone(demoVm()) as {
    metadata: Record<string, unknown>;
    spec: {
      running?: boolean;
      template: { metadata: { labels: Record<string, string> }; spec: Record<string, never> };
    };
  };
  vm.metadata = { name, labels: { "kubevirt.io/vm": name } };
  vm.spec.running = true;
  vm.spec.template.metadata.labels = { "kubevirt.io/vm": name };
  const spec = vm.spec.template.spec as unknown as {
    domain: { devices: { disks: unknown[] } };
    volumes: unknown[];
  };
  spec.domain.devices.disks.push(
    { name: "data", serial: "DATA", disk: { bus: "virtio" } },
    { name: "scratch", serial: "SCRATCH", disk: { bus: "virtio" } },
  );
  spec.volumes.push(
    { name: "data", persistentVolumeClaim: { claimName: claim } },
    { name: "scratch", emptyDisk: { capacity: "16Mi" } },
  );
  return vm;
}

/** A PersistentVolumeClaim of 64Mi in access mode `mode` (plus `spec`, e.g. a volumeMode and class), as JSON. */
export function claim(name: string, mode: string, spec: Record<string, unknown> = {}): string {
  return JSON.stringify({
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: { name },
    spec: { accessModes: [mode], resources: { requests: { storage: "64Mi" } }, ...spec },
  });
}

/** Shell that sets $D to the disk whose serial is `serial` (virtio-blk exposes it in sysfs). */
export const findDisk = (serial: string, variable: string): string =>
  `for b in /sys/block/vd*; do [ "$(cat $b/serial 2>/dev/null)" = ${serial} ] && ${variable}=/dev/\${b##*/}; done`;

/** The VMI `name` once Running (and not the one with `notUid`). */
export async function running(kubeconfig: string, name: string, notUid?: string): Promise<VmiView> {
  return eventually(async () => {
    const v = await vmiOrUndefined(kubeconfig, name);
    expect(v?.status?.phase).toBe("Running");
    if (notUid) expect(v?.metadata.uid).not.toBe(notUid);
    return v!;
  }, BOOT);
}

/**
 * Waits for the guest's shell (the cloud-init line), then runs `command` on the console; returns what it printed. The
 * session ends when the command is done ({@link inConsole}) or the output matches `until`, after 20 s at the most.
 */
export async function inGuest(
  kubeconfig: string,
  name: string,
  uid: string,
  command: string,
  pod?: string,
  until?: RegExp,
): Promise<string> {
  await eventually(async () => {
    expect(await consoleLog(kubeconfig, uid, pod)).toContain("printed from cloud-init userdata");
    return true;
  }, BOOT);
  const session = until
    ? await virtctl(kubeconfig, ["console", name], `${command}\r`, 20_000, until)
    : await inConsole(kubeconfig, name, command);
  return session.stdout;
}

/**
 * Waits for VMI `name` to be LiveMigratable=False (DisksNotLiveMigratable), then checks that `virtctl migrate` is
 * refused with KubeVirt's message naming its ReadWriteOnce claim `claimName`.
 */
export async function expectNotLiveMigratable(kubeconfig: string, name: string, claimName: string): Promise<void> {
  await eventually(async () => {
    const v = await vmiOrUndefined(kubeconfig, name);
    expect(v?.status?.conditions?.find((c) => c.type === "LiveMigratable")).toMatchObject({
      status: "False",
      reason: "DisksNotLiveMigratable",
    });
    return true;
  }, CLUSTER_WAIT);
  const migrate = await virtctl(kubeconfig, ["migrate", name]);
  expect(migrate.code).not.toBe(0);
  expect(migrate.stderr).toContain(
    `Cannot migrate VMI, Reason: DisksNotLiveMigratable, Message: cannot migrate VMI: PVC ${claimName} is not shared, live migration requires that all PVCs must be shared (using ReadWriteMany access mode)`,
  );
}

/** Writes the marker to the DATA disk and flushes; prints WROTE=<dd's status>. */
export const WRITE = `${findDisk("DATA", "D")}; echo ${MARKER.slice(0, 9)}$((4000+242)) | dd of=$D bs=512 count=1 conv=sync,fsync 2>/dev/null; echo WROTE=$?`;
/** Prints READ=<the DATA disk's first line>. */
export const READ_DATA = `${findDisk("DATA", "D")}; echo READ=$(dd if=$D bs=512 count=1 2>/dev/null | head -n 1)`;
/** Prints READ=<the DATA disk's first line> and SCRATCH=<the emptyDisk's first bytes>END. */
export const READ = `${findDisk("DATA", "D")}; ${findDisk("SCRATCH", "S")}; echo READ=$(dd if=$D bs=512 count=1 2>/dev/null | head -n 1); echo SCRATCH=$(dd if=$S bs=512 count=1 2>/dev/null | tr -d '\\000' | head -c 8)END`;
