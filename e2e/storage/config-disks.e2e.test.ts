/**
 * configMap, secret, downwardAPI and serviceAccount volumes as ISO disks, with the real kubectl and virtctl: the
 * seed's demo VM gets one disk of each kind (each with a serial); inside the guest (over the console) each disk, found
 * by its serial, is mounted as iso9660 and a file is read back: the ConfigMap's key, the Secret's decoded key, the
 * launcher pod's labels as the downward API renders them, the namespace and a token of the service account volume.
 * A VM whose ConfigMap does not exist keeps its launcher pod in ContainerCreating with kubelet's FailedMount event,
 * and starts once the ConfigMap is created.
 */

import { eventually } from "@kvt/testing";
import { describe, expect, inject, it } from "vitest";
import { kubectlOk } from "../lib/cli.ts";
import { CLUSTER_WAIT } from "../lib/cluster-wait.ts";
import { inGuest } from "../lib/disk-vm.ts";
import { demoVm } from "../lib/manifests.ts";
import { launcherPods, type VmiView, vmiOrUndefined } from "../lib/objects.ts";

const BOOT = { timeoutMs: 240_000, intervalMs: 1000 };

interface VmDoc {
  metadata: Record<string, unknown>;
  spec: {
    running?: boolean;
    template: {
      metadata: { labels: Record<string, string> };
      spec: { domain: { devices: { disks: unknown[] } }; volumes: unknown[] };
    };
  };
}

/** The demo VM with the given extra disks (name, serial) and volumes. */
function vmWith(name: string, disks: [string, string][], volumes: unknown[]): Record<string, unknown> {
  const vm = structuredClone(demoVm()) as unknown as VmDoc;
  vm.metadata = { name, labels: { "kubevirt.io/vm": name } };
  vm.spec.running = true;
  vm.spec.template.metadata.labels = { "kubevirt.io/vm": name };
  for (const [disk, serial] of disks)
    vm.spec.template.spec.domain.devices.disks.push({ name: disk, serial, disk: { bus: "virtio" } });
  vm.spec.template.spec.volumes.push(...volumes);
  return vm as unknown as Record<string, unknown>;
}

const object = (kind: string, name: string, body: Record<string, unknown>): string =>
  JSON.stringify({ apiVersion: "v1", kind, metadata: { name }, ...body });

/** Shell that mounts the ISO whose serial is `serial` at /mnt/<serial> and prints `<serial>=[<contents of file>]`. */
const readFromDisk = (serial: string, file: string): string =>
  `for b in /sys/block/vd*; do [ "$(cat $b/serial 2>/dev/null)" = ${serial} ] && D=/dev/\${b##*/}; done; ` +
  `mkdir -p /mnt/${serial} && mount -t iso9660 -o ro $D /mnt/${serial}; echo ${serial}=[$(cat /mnt/${serial}/${file})]`;

async function running(kubeconfig: string, name: string): Promise<VmiView> {
  return eventually(async () => {
    const v = await vmiOrUndefined(kubeconfig, name);
    expect(v?.status?.phase).toBe("Running");
    return v!;
  }, BOOT);
}

describe("config disks: ConfigMap, Secret, downward API and service account as ISO disks in the guest", () => {
  const kubeconfig = inject("kubeconfig");
  const NAME = "e2e-config-disks";
  let uid = "";

  it("a VM with one disk of each kind runs; its launcher pod mounts them where KubeVirt's does", async () => {
    await kubectlOk(
      kubeconfig,
      ["create", "-f", "-"],
      object("ConfigMap", "e2e-app-config", { data: { greeting: "hello-from-configmap" } }),
    );
    await kubectlOk(
      kubeconfig,
      ["create", "-f", "-"],
      object("Secret", "e2e-app-secret", { data: { password: Buffer.from("s3cr3t-from-secret").toString("base64") } }),
    );
    await kubectlOk(kubeconfig, ["create", "serviceaccount", "e2e-robot"]);
    const vm = vmWith(
      NAME,
      [
        ["app-config", "CFGMAP"],
        ["app-secret", "SECRET"],
        ["podinfo", "DAPI"],
        ["robot", "SATOKEN"],
      ],
      [
        { name: "app-config", configMap: { name: "e2e-app-config" } },
        { name: "app-secret", secret: { secretName: "e2e-app-secret" } },
        {
          name: "podinfo",
          downwardAPI: { fields: [{ path: "labels", fieldRef: { fieldPath: "metadata.labels" } }] },
        },
        { name: "robot", serviceAccount: { serviceAccountName: "e2e-robot" } },
      ],
    );
    await kubectlOk(kubeconfig, ["create", "-f", "-"], JSON.stringify(vm));
    uid = (await running(kubeconfig, NAME)).metadata.uid;
    const pod = (await launcherPods(kubeconfig, uid))[0];
    const mounts = JSON.parse(
      await kubectlOk(kubeconfig, [
        "get",
        "pod",
        pod.metadata.name,
        "-o",
        "jsonpath={.spec.containers[0].volumeMounts}",
      ]),
    ) as { name: string; mountPath: string }[];
    expect(mounts).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ name: "app-config", mountPath: "/var/run/kubevirt-private/config-map/app-config" }),
        expect.objectContaining({ name: "app-secret", mountPath: "/var/run/kubevirt-private/secret/app-secret" }),
        expect.objectContaining({ name: "podinfo", mountPath: "/var/run/kubevirt-private/downwardapi/podinfo" }),
        expect.objectContaining({ name: "robot", mountPath: "/var/run/secrets/kubernetes.io/serviceaccount" }),
      ]),
    );
    const account = await kubectlOk(kubeconfig, [
      "get",
      "pod",
      pod.metadata.name,
      "-o",
      "jsonpath={.spec.serviceAccountName}",
    ]);
    expect(account).toBe("e2e-robot");
  });

  it("the guest reads the ConfigMap's key from its disk", async () => {
    expect(await inGuest(kubeconfig, NAME, uid, readFromDisk("CFGMAP", "greeting"))).toContain(
      "CFGMAP=[hello-from-configmap]",
    );
  });

  it("the guest reads the Secret's key, decoded, from its disk", async () => {
    expect(await inGuest(kubeconfig, NAME, uid, readFromDisk("SECRET", "password"))).toContain(
      "SECRET=[s3cr3t-from-secret]",
    );
  });

  it("the guest reads the launcher pod's labels from the downward API disk", async () => {
    const out = await inGuest(kubeconfig, NAME, uid, `${readFromDisk("DAPI", "labels")} | grep -o 'vm="[a-z0-9-]*"'`);
    expect(out).toContain(`vm="${NAME}"`);
  });

  it("the guest reads the namespace and a token (TokenRequest's) from the service account disk", async () => {
    const out = await inGuest(
      kubeconfig,
      NAME,
      uid,
      `${readFromDisk("SATOKEN", "namespace")}; echo TOKEN-BYTES=[$(wc -c < /mnt/SATOKEN/token)]`,
    );
    expect(out).toContain("SATOKEN=[default]");
    expect(out).toMatch(/TOKEN-BYTES=\[[1-9][0-9]*\]/);
    await kubectlOk(kubeconfig, ["delete", "vm", NAME]);
  });
});

describe("config disks: a missing ConfigMap keeps the launcher pod from starting", () => {
  const kubeconfig = inject("kubeconfig");
  const NAME = "e2e-config-missing";

  it("waits in ContainerCreating with kubelet's FailedMount event, then starts once the ConfigMap exists", async () => {
    const vm = vmWith(NAME, [["settings", "SETTINGS"]], [{ name: "settings", configMap: { name: "e2e-late" } }]);
    await kubectlOk(kubeconfig, ["create", "-f", "-"], JSON.stringify(vm));
    const pod = await eventually(async () => {
      const v = await vmiOrUndefined(kubeconfig, NAME);
      expect(v?.metadata.uid).toBeDefined();
      const pods = await launcherPods(kubeconfig, v!.metadata.uid);
      expect(pods[0]?.spec.nodeName).toBeDefined();
      const waiting = await kubectlOk(kubeconfig, [
        "get",
        "pod",
        pods[0].metadata.name,
        "-o",
        "jsonpath={.status.containerStatuses[0].state.waiting.reason}",
      ]);
      expect(waiting).toBe("ContainerCreating");
      return pods[0];
    }, CLUSTER_WAIT);
    await eventually(async () => {
      const events = await kubectlOk(kubeconfig, [
        "get",
        "events",
        "--field-selector",
        `involvedObject.name=${pod.metadata.name},reason=FailedMount`,
        "-o",
        "jsonpath={.items[*].message}",
      ]);
      expect(events).toContain('MountVolume.SetUp failed for volume "settings" : configmap "e2e-late" not found');
      return true;
    }, CLUSTER_WAIT);
    await kubectlOk(kubeconfig, ["create", "-f", "-"], object("ConfigMap", "e2e-late", { data: { mode: "late" } }));
    await running(kubeconfig, NAME);
    await kubectlOk(kubeconfig, ["delete", "vm", NAME]);
  });
});
