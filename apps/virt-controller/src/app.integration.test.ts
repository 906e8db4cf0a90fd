/**
 * virt-controller against the real local API server over HTTP: the VM and VMI controllers for each run strategy,
 * restart with a stable firmware UUID, and orphan/adopt. No scheduler or kubelet runs, so launcher pods stay Pending.
 */
import { CERTIFICATES, type VirtualMachine, type VirtualMachineInstance } from "@kvt/api";
import { certificateInfo, isIssuedBy } from "@kvt/certs";
import { CORE_V1, KUBEVIRT_V1, type KubeObject, kubeConfigFor, type Pod, RestClient, resourceClient } from "@kvt/kube";
import { type ApiServerHandle, startApiServer } from "@kvt/local-cluster";
import { eventually, installKubeVirtCrds, newVm, newVmi, withRunning, withRunStrategy } from "@kvt/testing";
import { pino } from "pino";
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { VirtControllerApp } from "./app.ts";
import { BUNDLE_TARGET_TYPES } from "./certificates/cert-manager.ts";
import type { ConfigMap, Secret } from "./certificates/cert-plan.ts";

describe("virt-controller against the local API server", () => {
  let server: ApiServerHandle;
  let app: VirtControllerApp;
  let transport: RestClient;
  const registry = new Registry();
  const vms = () => resourceClient<VirtualMachine>(transport, KUBEVIRT_V1.virtualMachines);
  const vmis = () => resourceClient<VirtualMachineInstance>(transport, KUBEVIRT_V1.virtualMachineInstances);
  const pods = () => resourceClient<Pod>(transport, CORE_V1.pods);
  const getVmi = (name: string) =>
    vmis()
      .get("default", name)
      .catch(() => undefined);

  beforeAll(async () => {
    server = await startApiServer({ inMemory: true, port: 0, logger: pino({ level: "silent" }) });
    transport = new RestClient(kubeConfigFor(server.url, server.token), { registry });
    await installKubeVirtCrds(transport);
    // The install namespace and a webhook configuration (matching nothing the tests write) for the certificate
    // manager to fill in.
    await resourceClient(transport, CORE_V1.namespaces).create({ metadata: { name: "kubevirt" } });
    await resourceClient(transport, BUNDLE_TARGET_TYPES.mutatingWebhookConfigurations).create({
      metadata: { name: "virt-api-mutator" },
      webhooks: [
        {
          name: "nothing.kubevirt.io",
          clientConfig: { url: "https://127.0.0.1:1/none" },
          rules: [{ operations: ["CREATE"], apiGroups: ["example.com"], apiVersions: ["v1"], resources: ["none"] }],
          failurePolicy: "Ignore",
          sideEffects: "None",
          admissionReviewVersions: ["v1"],
        },
      ],
    } as KubeObject);
    app = new VirtControllerApp({ transport, logger: pino({ level: "silent" }), registry });
    await app.start();
  }, 60_000);

  afterAll(async () => {
    await app?.stop();
    await server?.stop();
  });

  it.each([
    ["Always", true, withRunStrategy("Always")],
    ["RerunOnFailure", true, withRunStrategy("RerunOnFailure")],
    ["Once", true, withRunStrategy("Once")],
    ["Manual", false, withRunStrategy("Manual")],
    ["Halted", false, withRunStrategy("Halted")],
  ] as const)("runStrategy %s creates a VMI and its launcher pod: %s", async (name, runs, opt) => {
    const vmName = `rs-${name.toLowerCase()}`;
    const vm = newVm(vmName, opt);
    delete vm.metadata!.uid;
    delete vm.metadata!.resourceVersion;
    delete vm.metadata!.creationTimestamp;
    await vms().create(vm);
    if (runs) {
      const vmi = await eventually(() => getVmi(vmName));
      expect(vmi.metadata?.ownerReferences?.[0]).toMatchObject({
        kind: "VirtualMachine",
        name: vmName,
        controller: true,
      });
      const pod = await eventually(async () =>
        (await pods().list("default")).items.find(
          (p) => p.metadata?.labels?.["kubevirt.io/created-by"] === vmi.metadata?.uid,
        ),
      );
      expect(pod.spec?.containers[0]?.image).toBe("kubevirt/virt-launcher");
      const scheduling = await eventually(async () =>
        (await getVmi(vmName))?.status?.phase === "Scheduling" ? true : undefined,
      );
      expect(scheduling).toBe(true);
      await eventually(async () => ((await vms().get("default", vmName)).status?.created ? true : undefined));
    } else {
      const status = await eventually(async () => (await vms().get("default", vmName)).status);
      expect(status.printableStatus).toBe("Stopped");
      expect(await getVmi(vmName)).toBeUndefined();
    }
  });

  it("running: false makes no VMI; patching running: true does; a deleted VMI comes back with the same firmware UUID", async () => {
    const vm = newVm("seed", withRunning(false));
    delete vm.metadata!.uid;
    delete vm.metadata!.resourceVersion;
    delete vm.spec.template.spec!.domain.firmware;
    await vms().create(vm);
    await eventually(async () => (await vms().get("default", "seed")).status?.printableStatus);
    expect(await getVmi("seed")).toBeUndefined();
    await vms().mergePatch("default", "seed", { spec: { running: true } });
    const first = await eventually(() => getVmi("seed"));
    const uuid = first.spec.domain.firmware?.uuid;
    expect(uuid).toMatch(/^[0-9a-f-]{36}$/);
    await vmis().delete("default", "seed");
    const second = await eventually(async () => {
      const v = await getVmi("seed");
      return v && v.metadata?.uid !== first.metadata?.uid ? v : undefined;
    });
    expect(second.spec.domain.firmware?.uuid).toBe(uuid);
  });

  it("deleting the VM with --cascade=orphan leaves the VMI; re-creating the VM adopts it", async () => {
    const vm = newVm("orphan");
    delete vm.metadata!.uid;
    delete vm.metadata!.resourceVersion;
    await vms().create(vm);
    const vmi = await eventually(() => getVmi("orphan"));
    await vms().delete("default", "orphan", { propagationPolicy: "Orphan" });
    await eventually(async () => ((await getVmi("orphan"))?.metadata?.ownerReferences?.length ? undefined : true));
    const again = await vms().create(vm);
    const adopted = await eventually(async () => {
      const v = await getVmi("orphan");
      return v?.metadata?.ownerReferences?.some((o) => o.uid === again.metadata?.uid) ? v : undefined;
    });
    expect(adopted.metadata?.uid).toBe(vmi.metadata?.uid);
  });

  it("does not fight virt-handler over a Running VMI's conditions (each writer keeps the other's order)", async () => {
    // virt-handler appends the conditions it sets (Ready, LiveMigratable) at the end of the list, as the handler
    // does; the controller used to move PodScheduled to the end on each reconcile, and each write triggered the
    // other's next one: hundreds of UPDATEs a second, for as long as the VMI ran.
    const v = newVmi("writers");
    delete v.metadata!.uid;
    delete v.metadata!.resourceVersion;
    delete v.metadata!.creationTimestamp;
    delete v.status;
    const created = await vmis().create(v);
    const pod = await eventually(async () =>
      (await pods().list("default")).items.find(
        (p) => p.metadata?.labels?.["kubevirt.io/created-by"] === created.metadata?.uid,
      ),
    );
    const placed = await pods().update({ ...pod, spec: { ...pod.spec!, nodeName: "n1" } });
    const ready = [
      { type: "PodScheduled", status: "True" as const },
      { type: "Ready", status: "True" as const },
    ];
    await pods().updateStatus({ ...placed, status: { phase: "Running", conditions: ready } });
    await eventually(async () => ((await getVmi("writers"))?.status?.phase === "Scheduled" ? true : undefined));
    type Cond = NonNullable<NonNullable<VirtualMachineInstance["status"]>["conditions"]>[number];
    const handlerWrite = async (vmi: VirtualMachineInstance): Promise<boolean> => {
      let conds: Cond[] = vmi.status?.conditions ?? [];
      for (const type of ["Ready", "LiveMigratable"]) {
        const old = conds.find((c) => c.type === type);
        const next = { type, status: "True" as const, lastTransitionTime: old?.lastTransitionTime ?? "t" };
        conds = [...conds.filter((c) => c.type !== type), next];
      }
      if (vmi.status?.phase === "Running" && JSON.stringify(conds) === JSON.stringify(vmi.status?.conditions))
        return false;
      await vmis()
        .patch("default", "writers", [
          { op: "test", path: "/metadata/resourceVersion", value: vmi.metadata?.resourceVersion },
          { op: "replace", path: "/status/phase", value: "Running" },
          { op: "replace", path: "/status/conditions", value: conds },
        ])
        .catch(() => undefined); // a conflict: the next pass reads the newer VMI
      return true;
    };
    const controllerUpdates = async (): Promise<number> =>
      Number(
        /kubevirt_rest_client_requests_total\{code="200",method="PUT",[^}]*resource="virtualmachineinstances",verb="UPDATE"\} (\d+)/.exec(
          await registry.metrics(),
        )?.[1] ?? 0,
      );
    // Play the handler for 3 s: write whenever its view of the conditions differs from the stored one.
    let handlerWrites = 0;
    const before = await controllerUpdates();
    const until = Date.now() + 3000;
    while (Date.now() < until) {
      if (await handlerWrite((await getVmi("writers"))!)) handlerWrites++;
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(handlerWrites).toBeLessThanOrEqual(2);
    expect((await controllerUpdates()) - before).toBeLessThanOrEqual(1);
  });

  it("keeps KubeVirt's certificate Secrets, the CA bundle and the caBundles, and renews on a CR change", async () => {
    const secrets = resourceClient<Secret>(transport, CORE_V1.secrets);
    const names = [CERTIFICATES.caSecret, CERTIFICATES.virtApi, CERTIFICATES.handlerServer, CERTIFICATES.handlerClient];
    const stored = await eventually(async () => {
      const all = (await secrets.list("kubevirt")).items.filter((s) => names.includes(s.metadata?.name as never));
      return all.length === names.length ? all : undefined;
    });
    expect(stored.map((s) => s.type)).toEqual(Array(4).fill("kubernetes.io/tls"));
    const pem = (s: Secret | undefined): string => Buffer.from(s?.data?.["tls.crt"] ?? "", "base64").toString();
    const ca = pem(stored.find((s) => s.metadata?.name === CERTIFICATES.caSecret));
    const bundle = await resourceClient<ConfigMap>(transport, CORE_V1.configMaps).get("kubevirt", "kubevirt-ca");
    expect(bundle.data?.["ca-bundle"]?.trim()).toBe(ca.trim());
    const hooks = await eventually(async () => {
      const m = (await resourceClient(transport, BUNDLE_TARGET_TYPES.mutatingWebhookConfigurations).get(
        "",
        "virt-api-mutator",
      )) as KubeObject & { webhooks: { clientConfig: { caBundle?: string } }[] };
      return m.webhooks[0]?.clientConfig.caBundle ? m : undefined;
    });
    expect(Buffer.from(hooks.webhooks[0]?.clientConfig.caBundle ?? "", "base64").toString()).toBe(
      bundle.data?.["ca-bundle"],
    );
    // The CR asks for 2h certificates: each component certificate is issued again, for 2h, by the same CA.
    const before = pem(await secrets.get("kubevirt", CERTIFICATES.virtApi));
    await resourceClient(transport, KUBEVIRT_V1.kubevirts).create({
      metadata: { name: "kubevirt", namespace: "kubevirt" },
      spec: { certificateRotateStrategy: { selfSigned: { server: { duration: "2h" } } } },
    } as KubeObject);
    const renewed = await eventually(async () => {
      const s = await secrets.get("kubevirt", CERTIFICATES.virtApi);
      return s.metadata?.annotations?.["kubevirt.io/duration"] === "2h0m0s" ? pem(s) : undefined;
    });
    expect(renewed).not.toBe(before);
    expect(isIssuedBy(renewed, ca)).toBe(true);
    const { notBefore, notAfter } = certificateInfo(renewed);
    expect(notAfter.getTime() - notBefore.getTime()).toBe(2 * 3_600_000 + 60_000);
  });
});
