import {
  claimInfo,
  KVM_DEVICE_RESOURCE,
  objectKey,
  type PersistentVolumeClaimInfo,
  TUN_DEVICE_RESOURCE,
  VHOST_NET_DEVICE_RESOURCE,
  type VirtualMachineInstance,
} from "@kvt/api";
import { CORE_V1, Expectations, KUBEVIRT_V1, labelIndex, type Pod } from "@kvt/kube";
import {
  FakeApi,
  FakeRecorder,
  fakeStore,
  newPod,
  newVmi,
  type Option,
  ownedBy,
  reconcileWithGuard,
  withCpus,
  withLabels,
  withMemory,
  withPhase,
} from "@kvt/testing";
import { describe, expect, it } from "vitest";
import { guestMemoryBytes, launcherOverheadBytes, renderLauncherPod } from "./pod-template.ts";
import { VmiController } from "./vmi-controller.ts";
import { planVmi } from "./vmi-status.ts";

const launcherOf = (vmi: VirtualMachineInstance, ...opts: Option<Pod>[]): Pod =>
  newPod(
    `virt-launcher-${vmi.metadata!.name}-abcde`,
    ownedBy({ ...vmi }),
    withLabels({ "kubevirt.io/created-by": vmi.metadata!.uid! }),
    ...opts,
  );
const running =
  (node: string, ready = true): Option<Pod> =>
  (p) => {
    p.spec!.nodeName = node;
    p.status = {
      phase: "Running",
      conditions: [
        { type: "PodScheduled", status: "True" },
        { type: "Ready", status: ready ? "True" : "False" },
      ],
    };
  };
const podPhase =
  (phase: "Failed" | "Succeeded"): Option<Pod> =>
  (p) => {
    p.status = { phase };
  };

function setup(
  vmi: VirtualMachineInstance,
  pods: Pod[] = [],
  claim?: (ns: string, name: string) => PersistentVolumeClaimInfo | undefined,
) {
  const api = new FakeApi();
  const stored = api.seed(KUBEVIRT_V1.virtualMachineInstances, vmi);
  const vmis = fakeStore([stored]);
  const podStore = fakeStore(pods, { createdBy: labelIndex("kubevirt.io/created-by") });
  const recorder = new FakeRecorder();
  const controller = new VmiController({
    vmis,
    podsOf: (uid) => podStore.byIndex("createdBy", uid),
    vmiClient: api.client(KUBEVIRT_V1.virtualMachineInstances),
    podClient: api.client(CORE_V1.pods),
    recorder,
    expectations: new Expectations(),
    ...(claim ? { claim } : {}),
  });
  const run = () => reconcileWithGuard(controller, objectKey("default", vmi.metadata!.name!), [vmis, podStore]);
  const vmiNow = () =>
    api.stored<VirtualMachineInstance>(KUBEVIRT_V1.virtualMachineInstances, "default", vmi.metadata!.name!)!;
  return { api, recorder, run, vmiNow };
}

describe("planVmi", () => {
  const now = "2026-01-01T00:00:00Z";
  const vmi = newVmi("a");
  it.each([
    ["new VMI, no pod", newVmi("a"), [], "Pending", true],
    ["Pending, pod pending", newVmi("a", withPhase("Pending")), [launcherOf(vmi)], "Scheduling", false],
    [
      "Scheduling, pod running but not ready",
      newVmi("a", withPhase("Scheduling")),
      [launcherOf(vmi, running("n1", false))],
      "Scheduling",
      false,
    ],
    [
      "Scheduling, pod ready",
      newVmi("a", withPhase("Scheduling")),
      [launcherOf(vmi, running("n1"))],
      "Scheduled",
      false,
    ],
    ["Scheduling, pod vanished", newVmi("a", withPhase("Scheduling")), [], "Failed", false],
    [
      "Scheduling, pod failed",
      newVmi("a", withPhase("Scheduling")),
      [launcherOf(vmi, podPhase("Failed"))],
      "Failed",
      false,
    ],
    ["Running, pod vanished", newVmi("a", withPhase("Running", "n1")), [], "Failed", false],
    [
      "Running, pod completed",
      newVmi("a", withPhase("Running", "n1")),
      [launcherOf(vmi, podPhase("Succeeded"))],
      "Succeeded",
      false,
    ],
    ["Running, pod alive", newVmi("a", withPhase("Running", "n1")), [launcherOf(vmi, running("n1"))], "Running", false],
  ] as const)("%s -> %s", (_n, v, pods, phase, createPod) => {
    const plan = planVmi(v, pods, now);
    expect(plan.status.phase).toBe(phase);
    expect(plan.createPod).toBe(createPod);
  });

  it("records the failure reason and keeps activePods and phase timestamps", () => {
    const failed = planVmi(newVmi("a", withPhase("Scheduling")), [], now).status;
    expect(failed.reason).toBe("PodNotExists");
    const scheduled = planVmi(newVmi("a", withPhase("Scheduling")), [launcherOf(vmi, running("n1"))], now).status;
    expect(scheduled.nodeName).toBe("n1");
    expect(Object.values(scheduled.activePods ?? {})).toEqual(["n1"]);
    expect(scheduled.phaseTransitionTimestamps?.map((t) => t.phase)).toEqual(["Scheduled"]);
    expect(scheduled.conditions).toContainEqual(expect.objectContaining({ type: "PodScheduled", status: "True" }));
  });
});

describe("renderLauncherPod", () => {
  it("adds KubeVirt's guest-console-log container: virt-tail of the launcher's serial console log", () => {
    const vmi = newVmi("vm-c", withMemory("64Mi"));
    const containers = renderLauncherPod(vmi).spec!.containers;
    expect(containers.map((c) => c.name)).toEqual(["compute", "guest-console-log"]);
    expect(containers[1]).toMatchObject({
      image: "kubevirt/virt-launcher",
      command: ["/usr/bin/virt-tail", "--logfile", `/var/run/kubevirt-private/${vmi.metadata!.uid}/virt-serial0-log`],
      resources: { requests: { cpu: "5m", memory: "35M" } },
    });
  });

  it("requests guest memory plus overhead, CPU and the KVM device, with KubeVirt's labels and owner", () => {
    const vmi = newVmi("vm-x", withMemory("1Gi"), withCpus(2), (v) => {
      v.spec.nodeSelector = { zone: "a" };
      v.spec.tolerations = [{ key: "k", operator: "Exists" }];
    });
    const pod = renderLauncherPod(vmi);
    const c = pod.spec!.containers[0];
    expect(c.image).toBe("kubevirt/virt-launcher");
    expect(c.command).toEqual([
      "/usr/bin/virt-launcher-monitor",
      "--namespace",
      "default",
      "--name",
      "vm-x",
      "--uid",
      vmi.metadata!.uid,
    ]);
    expect(c.resources?.requests?.memory).toBe(`${(2 ** 30 + launcherOverheadBytes(2 ** 30)) / 2 ** 20}Mi`);
    expect(c.resources?.requests?.[KVM_DEVICE_RESOURCE]).toBe("1");
    expect(pod.metadata?.labels).toMatchObject({
      "kubevirt.io": "virt-launcher",
      "kubevirt.io/created-by": vmi.metadata!.uid,
    });
    expect(pod.metadata?.ownerReferences?.[0]).toMatchObject({
      kind: "VirtualMachineInstance",
      name: "vm-x",
      controller: true,
    });
    expect(pod.spec?.nodeSelector).toEqual({ zone: "a", "kubevirt.io/schedulable": "true" });
    expect(pod.spec?.tolerations).toEqual([{ key: "k", operator: "Exists" }]);
    expect(guestMemoryBytes(vmi)).toBe(2 ** 30);
  });

  it.each([
    [undefined, "1", "never"],
    [false, "1", "never"],
    [true, undefined, "whenNeeded"],
  ])("with useEmulation %s requests KVM %s and tells the launcher %s", (allowEmulation, kvm, useEmulation) => {
    const pod = renderLauncherPod(
      newVmi("vm-e", withMemory("64Mi")),
      allowEmulation === undefined ? {} : { allowEmulation },
    );
    const c = pod.spec!.containers[0];
    expect(c.resources?.requests?.[KVM_DEVICE_RESOURCE]).toBe(kvm);
    expect(c.resources?.limits?.[KVM_DEVICE_RESOURCE]).toBe(kvm);
    expect(c.env?.find((e) => e.name === "KUBEVIRT_USE_EMULATION")?.value).toBe(useEmulation);
  });

  const DEVICES = [KVM_DEVICE_RESOURCE, TUN_DEVICE_RESOURCE, VHOST_NET_DEVICE_RESOURCE];
  it.each([
    ["a virtio interface", [{ name: "default", masquerade: {} }], undefined, false, DEVICES],
    [
      "a virtio interface, emulation allowed",
      [{ name: "default", model: "virtio" }],
      undefined,
      true,
      [TUN_DEVICE_RESOURCE],
    ],
    [
      "an e1000 interface",
      [{ name: "default", model: "e1000" }],
      undefined,
      false,
      [KVM_DEVICE_RESOURCE, TUN_DEVICE_RESOURCE],
    ],
    ["no interface (the default pod interface)", [], undefined, false, [KVM_DEVICE_RESOURCE, TUN_DEVICE_RESOURCE]],
    ["no interface, autoattachPodInterface false", [], false, false, [KVM_DEVICE_RESOURCE]],
    ["no interface, autoattachPodInterface false, emulation allowed", [], false, true, []],
  ])("with %s requests KubeVirt's devices", (_what, interfaces, autoattach, allowEmulation, want) => {
    const vmi = newVmi("vm-n", withMemory("64Mi"), (v) => {
      v.spec.domain.devices.interfaces = interfaces;
      if (autoattach !== undefined) v.spec.domain.devices.autoattachPodInterface = autoattach;
    });
    const c = renderLauncherPod(vmi, { allowEmulation }).spec!.containers[0];
    const devices = (m: Record<string, string> | undefined): string[] =>
      Object.keys(m ?? {})
        .filter((k) => k.startsWith("devices.kubevirt.io/"))
        .sort();
    expect(devices(c.resources?.limits)).toEqual([...want].sort());
    expect(devices(c.resources?.requests)).toEqual([...want].sort());
    for (const d of want) expect(c.resources?.limits?.[d]).toBe("1");
  });
});

describe("launcher pod storage", () => {
  it("mounts each claim and hostDisk directory under vmi-disks, and the ephemeral-disks emptyDir", () => {
    const vmi = newVmi("vm-d", withMemory("64Mi"), (v) => {
      v.spec.volumes = [
        { name: "root", containerDisk: { image: "local/demo" } },
        { name: "data", persistentVolumeClaim: { claimName: "pvc1" } },
        { name: "eph", ephemeral: { persistentVolumeClaim: { claimName: "base" } } },
        { name: "host", hostDisk: { path: "/data/vm/disk.img", type: "DiskOrCreate", capacity: "1Gi" } },
      ];
    });
    const pod = renderLauncherPod(vmi);
    expect(pod.spec?.volumes).toEqual([
      { name: "private", emptyDir: {} },
      { name: "sockets", emptyDir: {} },
      { name: "ephemeral-disks", emptyDir: {} },
      { name: "root", image: { reference: "local/demo", pullPolicy: "Always" } },
      { name: "data", persistentVolumeClaim: { claimName: "pvc1" } },
      { name: "eph", persistentVolumeClaim: { claimName: "base", readOnly: true } },
      { name: "host", hostPath: { path: "/data/vm", type: "DirectoryOrCreate" } },
    ]);
    expect(pod.spec?.containers[0]?.volumeMounts).toEqual([
      { name: "private", mountPath: "/var/run/kubevirt-private" },
      { name: "ephemeral-disks", mountPath: "/var/run/kubevirt-ephemeral-disks" },
      { name: "sockets", mountPath: "/var/run/kubevirt/sockets" },
      { name: "root", mountPath: "/var/run/kubevirt/image-volumes/root", readOnly: true },
      { name: "data", mountPath: "/var/run/kubevirt-private/vmi-disks/data" },
      { name: "eph", mountPath: "/var/run/kubevirt-private/vmi-disks/eph", readOnly: true },
      { name: "host", mountPath: "/var/run/kubevirt-private/vmi-disks/host" },
    ]);
  });
});

describe("launcher pod image volumes", () => {
  it("renders each containerDisk and the kernelBoot container as a read-only image volume with its pull policy", () => {
    const vmi = newVmi("vm-img", withMemory("64Mi"), (v) => {
      v.spec.domain.firmware = {
        kernelBoot: { container: { image: "registry.example/kernels:6.1", imagePullSecret: "kernels-pull" } },
      };
      v.spec.volumes = [
        { name: "root", containerDisk: { image: "local/test-guest:latest", imagePullSecret: "disks-pull" } },
        { name: "second", containerDisk: { image: "registry.example/disks@sha256:abc", imagePullPolicy: "Never" } },
        { name: "third", containerDisk: { image: "registry.example:5000/disks", imagePullSecret: "disks-pull" } },
      ];
    });
    const pod = renderLauncherPod(vmi);
    expect(pod.spec?.volumes?.slice(3)).toEqual([
      { name: "root", image: { reference: "local/test-guest:latest", pullPolicy: "Always" } },
      { name: "second", image: { reference: "registry.example/disks@sha256:abc", pullPolicy: "Never" } },
      { name: "third", image: { reference: "registry.example:5000/disks", pullPolicy: "Always" } },
      { name: "kernel-boot-volume", image: { reference: "registry.example/kernels:6.1", pullPolicy: "IfNotPresent" } },
    ]);
    expect(pod.spec?.containers[0]?.volumeMounts?.slice(3)).toEqual([
      { name: "root", mountPath: "/var/run/kubevirt/image-volumes/root", readOnly: true },
      { name: "second", mountPath: "/var/run/kubevirt/image-volumes/second", readOnly: true },
      { name: "third", mountPath: "/var/run/kubevirt/image-volumes/third", readOnly: true },
      { name: "kernel-boot-volume", mountPath: "/var/run/kubevirt/image-volumes/kernel-boot-volume", readOnly: true },
    ]);
    expect(pod.spec?.imagePullSecrets).toEqual([{ name: "disks-pull" }, { name: "kernels-pull" }]);
  });

  it("sets no imagePullSecrets when no image names one", () => {
    const vmi = newVmi("vm-img2", withMemory("64Mi"), (v) => {
      v.spec.volumes = [{ name: "root", containerDisk: { image: "local/demo-linux:v1" } }];
    });
    const pod = renderLauncherPod(vmi);
    expect(pod.spec?.volumes?.[3]).toEqual({
      name: "root",
      image: { reference: "local/demo-linux:v1", pullPolicy: "IfNotPresent" },
    });
    expect(pod.spec && "imagePullSecrets" in pod.spec).toBe(false);
  });
});

describe("launcher pod config volumes", () => {
  const vmi = newVmi("vm-cfg", withMemory("64Mi"), (v) => {
    v.spec.domain.devices.disks = ["cm", "sec", "dapi", "sa"].map((name) => ({ name, disk: { bus: "virtio" } }));
    v.spec.volumes = [
      { name: "cm", configMap: { name: "app-config", optional: true, volumeLabel: "CFG" } },
      { name: "sec", secret: { secretName: "app-secret" } },
      { name: "unused", secret: { secretName: "other" } },
      { name: "dapi", downwardAPI: { fields: [{ path: "labels", fieldRef: { fieldPath: "metadata.labels" } }] } },
      { name: "sa", serviceAccount: { serviceAccountName: "robot" } },
    ];
  });

  it("renders configMap, secret and downwardAPI pod volumes, mounted read-only where KubeVirt mounts them", () => {
    const pod = renderLauncherPod(vmi);
    expect(pod.spec?.volumes?.slice(3, 7)).toEqual([
      { name: "cm", configMap: { name: "app-config", optional: true } },
      { name: "sec", secret: { secretName: "app-secret" } },
      { name: "unused", secret: { secretName: "other" } },
      { name: "dapi", downwardAPI: { items: [{ path: "labels", fieldRef: { fieldPath: "metadata.labels" } }] } },
    ]);
    expect(pod.spec?.containers[0]?.volumeMounts?.slice(3)).toEqual([
      { name: "cm", mountPath: "/var/run/kubevirt-private/config-map/cm", readOnly: true },
      { name: "sec", mountPath: "/var/run/kubevirt-private/secret/sec", readOnly: true },
      { name: "dapi", mountPath: "/var/run/kubevirt-private/downwardapi/dapi", readOnly: true },
      { name: "sa", mountPath: "/var/run/secrets/kubernetes.io/serviceaccount", readOnly: true },
    ]);
  });

  it("runs the pod as the serviceAccount volume's account with the admission plugin's projected token volume", () => {
    const pod = renderLauncherPod(vmi);
    expect(pod.spec?.serviceAccountName).toBe("robot");
    expect(pod.spec?.automountServiceAccountToken).toBe(false);
    expect(pod.spec?.volumes?.find((v) => v.name === "sa")).toEqual({
      name: "sa",
      projected: {
        defaultMode: 0o644,
        sources: [
          { serviceAccountToken: { path: "token", expirationSeconds: 3607 } },
          { configMap: { name: "kube-root-ca.crt", items: [{ key: "ca.crt", path: "ca.crt" }] } },
          {
            downwardAPI: {
              items: [{ path: "namespace", fieldRef: { apiVersion: "v1", fieldPath: "metadata.namespace" } }],
            },
          },
        ],
      },
    });
  });

  it("without a serviceAccount volume the pod sets no account and mounts no token (KubeVirt: automount off)", () => {
    const pod = renderLauncherPod(newVmi("vm-plain", withMemory("64Mi")));
    expect(pod.spec?.serviceAccountName).toBeUndefined();
    expect(pod.spec?.automountServiceAccountToken).toBe(false);
  });
});

describe("VmiController claims", () => {
  const withClaim = (v: VirtualMachineInstance): void => {
    v.spec.domain.devices.disks = [{ name: "data", disk: { bus: "virtio" } }];
    v.spec.volumes = [{ name: "data", persistentVolumeClaim: { claimName: "pvc1" } }];
  };

  const info: PersistentVolumeClaimInfo = { claimName: "pvc1", accessModes: ["ReadWriteOnce"] };

  it("waits in Pending with FailedPvcNotFound while a claim does not exist", async () => {
    const { api, recorder, run, vmiNow } = setup(newVmi("a", withClaim), [], () => undefined);
    await run();
    expect(api.summary()).toEqual(["update virtualmachineinstances default/a"]);
    expect(recorder.reasons()).toEqual(["FailedPvcNotFound"]);
    expect(vmiNow().status?.phase).toBe("Pending");
    expect(vmiNow().status?.conditions?.find((c) => c.type === "Synchronized")).toMatchObject({
      status: "False",
      reason: "FailedPvcNotFound",
      message: "PVC default/pvc1 does not exist, waiting for it to appear",
    });
    expect(vmiNow().status?.volumeStatus).toEqual([{ name: "data", target: "vda" }]);
  });

  it("creates the pod once the claim exists, drops the condition and records the claim in volumeStatus", async () => {
    const waiting = newVmi("a", withClaim, withPhase("Pending"), (v) => {
      v.status!.conditions = [
        { type: "Synchronized", status: "False", reason: "FailedPvcNotFound", message: "PVC default/pvc1 ..." },
      ];
    });
    const { api, run, vmiNow } = setup(waiting, [], (_ns, name) => (name === "pvc1" ? info : undefined));
    await run();
    expect(api.summary()).toEqual(["create pods", "update virtualmachineinstances default/a"]);
    expect(vmiNow().status?.phase).toBe("Scheduling");
    expect(vmiNow().status?.conditions?.find((c) => c.type === "Synchronized")).toBeUndefined();
    expect(vmiNow().status?.volumeStatus).toEqual([{ name: "data", target: "vda", persistentVolumeClaimInfo: info }]);
  });
});

describe("VmiController Block claims", () => {
  it("maps a Block claim into the launcher pod as /dev/<volume> and records volumeMode Block in volumeStatus", async () => {
    const vmi = newVmi("a", (v) => {
      v.spec.domain.devices.disks = [{ name: "data", disk: { bus: "virtio" } }];
      v.spec.volumes = [{ name: "data", persistentVolumeClaim: { claimName: "raw" } }];
    });
    const pvc = {
      metadata: { name: "raw" },
      spec: { accessModes: ["ReadWriteMany"], volumeMode: "Block", resources: { requests: { storage: "64Mi" } } },
      status: { accessModes: ["ReadWriteMany"], capacity: { storage: "64Mi" } },
    };
    const { api, run, vmiNow } = setup(vmi, [], (_ns, name) => (name === "raw" ? claimInfo(pvc) : undefined));
    await run();
    const [pod] = api.all<Pod>(CORE_V1.pods);
    expect(pod?.spec?.containers[0]?.volumeDevices).toEqual([{ name: "data", devicePath: "/dev/data" }]);
    expect(pod?.spec?.containers[0]?.volumeMounts?.some((m) => m.name === "data")).toBe(false);
    // KubeVirt's processPVCInfo without CDI: the default filesystem overhead is reported for Block claims too.
    expect(vmiNow().status?.volumeStatus).toEqual([
      {
        name: "data",
        target: "vda",
        persistentVolumeClaimInfo: {
          claimName: "raw",
          accessModes: ["ReadWriteMany"],
          volumeMode: "Block",
          capacity: { storage: "64Mi" },
          requests: { storage: "64Mi" },
          filesystemOverhead: "0.055",
        },
      },
    ]);
  });
});

describe("VmiController", () => {
  it("creates the launcher pod for a new VMI, moves it through Pending to Scheduling in one write and adds the finalizer", async () => {
    const { api, recorder, run, vmiNow } = setup(newVmi("a"));
    await run();
    expect(api.summary()).toEqual(["create pods", "update virtualmachineinstances default/a"]);
    expect(recorder.reasons()).toEqual(["SuccessfulCreate"]);
    expect(vmiNow().status?.phase).toBe("Scheduling");
    expect(vmiNow().status?.phaseTransitionTimestamps?.map((t) => t.phase)).toEqual(["Pending", "Scheduling"]);
    expect(vmiNow().metadata?.finalizers).toContain("kubevirt.io/foregroundDeleteVirtualMachine");
  });

  it("stays Pending with a FailedCreate event when the pod cannot be created, and throws for a retry", async () => {
    const { api, recorder, run, vmiNow } = setup(newVmi("a"));
    api.failOn("create", "pods", new Error("quota exceeded"));
    await expect(run()).rejects.toThrow(/quota exceeded/);
    expect(recorder.reasons()).toEqual(["FailedCreate"]);
    expect(vmiNow().status?.phase).toBe("Pending");
  });

  it("does not create a second pod while its first creation is unobserved (expectations)", async () => {
    const { api, run } = setup(newVmi("a"));
    await run();
    await run();
    expect(api.summary().filter((a) => a === "create pods")).toHaveLength(1);
  });

  it("moves to Scheduled once the pod is ready", async () => {
    const vmi = newVmi("a", withPhase("Scheduling"));
    const { run, vmiNow } = setup(vmi, [launcherOf(vmi, running("node01"))]);
    await run();
    expect(vmiNow().status).toMatchObject({ phase: "Scheduled", nodeName: "node01" });
  });

  it("on deletion deletes the live pods, and drops the finalizer once they are gone", async () => {
    const vmi = newVmi("a", withPhase("Running", "n1"), (v) => {
      v.metadata!.deletionTimestamp = new Date().toISOString();
      v.metadata!.finalizers = ["kubevirt.io/foregroundDeleteVirtualMachine"];
    });
    const first = setup(vmi, [launcherOf(vmi, running("n1"))]);
    await first.run();
    expect(first.api.summary()).toEqual([`delete pods default/virt-launcher-a-abcde`]);
    const second = setup(vmi, [launcherOf(vmi, podPhase("Succeeded"))]);
    await second.run();
    expect(second.vmiNow().metadata?.finalizers).toEqual([]);
  });

  it("writes nothing when nothing changed", async () => {
    const vmi = newVmi("a", withPhase("Running", "n1"));
    const pod = launcherOf(vmi, running("n1"));
    vmi.metadata!.finalizers = ["kubevirt.io/foregroundDeleteVirtualMachine"];
    vmi.status!.activePods = { [pod.metadata!.uid!]: "n1" };
    vmi.status!.conditions = [{ type: "PodScheduled", status: "True", lastTransitionTime: "t" }];
    const { api, run } = setup(vmi, [pod]);
    await run();
    expect(api.summary()).toEqual([]);
  });

  it("writes nothing for a Running VMI whose handler wrote its conditions after PodScheduled (no reorder ping-pong)", async () => {
    const vmi = newVmi("a", withPhase("Running", "n1"));
    const pod = launcherOf(vmi, running("n1"));
    vmi.metadata!.finalizers = ["kubevirt.io/foregroundDeleteVirtualMachine"];
    vmi.status!.activePods = { [pod.metadata!.uid!]: "n1" };
    vmi.status!.conditions = [
      { type: "PodScheduled", status: "True", lastTransitionTime: "t" },
      { type: "Ready", status: "True", lastTransitionTime: "t" },
      { type: "LiveMigratable", status: "True", lastTransitionTime: "t" },
    ];
    const { api, run } = setup(vmi, [pod]);
    await run();
    expect(api.summary()).toEqual([]);
  });

  it("skips reconciles while the cache still shows the version its own update replaced (no 409 retry)", async () => {
    const vmi = newVmi("a");
    const api = new FakeApi();
    const stored = api.seed(KUBEVIRT_V1.virtualMachineInstances, vmi);
    const vmis = fakeStore([stored]);
    const podStore = fakeStore<Pod>([], { createdBy: labelIndex("kubevirt.io/created-by") });
    const expectations = new Expectations();
    const controller = new VmiController({
      vmis,
      podsOf: (uid) => podStore.byIndex("createdBy", uid),
      vmiClient: api.client(KUBEVIRT_V1.virtualMachineInstances),
      podClient: api.client(CORE_V1.pods),
      recorder: new FakeRecorder(),
      expectations,
    });
    const key = objectKey("default", "a");
    const run = () => reconcileWithGuard(controller, key, [vmis, podStore]);
    await run();
    expect(api.summary()).toEqual(["create pods", "update virtualmachineinstances default/a"]);
    // The pod's ADDED event arrives (and lowers the expectation) before the VMI's MODIFIED event.
    const [createdPod] = api.all<Pod>(CORE_V1.pods);
    podStore.upsert(createdPod);
    expectations.creationObserved(key);
    await run();
    expect(api.summary()).toHaveLength(2);
    // Once the cache shows the update, reconciles run again (and find nothing to do).
    vmis.upsert(api.stored<VirtualMachineInstance>(KUBEVIRT_V1.virtualMachineInstances, "default", "a")!);
    await run();
    expect(api.summary()).toHaveLength(2);
  });
});
