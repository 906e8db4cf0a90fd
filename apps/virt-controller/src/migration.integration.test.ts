/**
 * A migration's controller-side lifecycle against the real local API server; the test plays the scheduler (binding),
 * the kubelet (pod status) and both virt-handlers (VMI status and migrationState).
 */
import type { VirtualMachineInstance, VirtualMachineInstanceMigration } from "@kvt/api";
import {
  CORE_V1,
  KUBEVIRT_V1,
  kubeConfigFor,
  LeaderElector,
  type Lease,
  type Pod,
  RestClient,
  resourceClient,
} from "@kvt/kube";
import { type ApiServerHandle, startApiServer } from "@kvt/local-cluster";
import { eventually, installKubeVirtCrds, newMigration, newVmi } from "@kvt/testing";
import { pino } from "pino";
import { Registry } from "prom-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { VirtControllerApp } from "./app.ts";

describe("migration lifecycle against the local API server", () => {
  let server: ApiServerHandle;
  let app: VirtControllerApp;
  let transport: RestClient;
  const vmis = () => resourceClient<VirtualMachineInstance>(transport, KUBEVIRT_V1.virtualMachineInstances);
  const vmims = () =>
    resourceClient<VirtualMachineInstanceMigration>(transport, KUBEVIRT_V1.virtualMachineInstanceMigrations);
  const pods = () => resourceClient<Pod>(transport, CORE_V1.pods);
  const phaseOf = async (name: string, want: string) =>
    (await vmims().get("default", name)).status?.phase === want ? true : undefined;

  /** Binds the pod to `node` and reports it Running and Ready, as scheduler and kubelet would. */
  async function runPod(pod: Pod, node: string): Promise<void> {
    await transport.request({
      method: "POST",
      path: `/api/v1/namespaces/default/pods/${pod.metadata?.name}/binding`,
      body: {
        apiVersion: "v1",
        kind: "Binding",
        metadata: { name: pod.metadata?.name },
        target: { apiVersion: "v1", kind: "Node", name: node },
      },
    });
    await pods().mergePatch(
      "default",
      pod.metadata!.name!,
      {
        status: {
          phase: "Running",
          conditions: [
            { type: "PodScheduled", status: "True" },
            { type: "Ready", status: "True" },
          ],
        },
      },
      "status",
    );
  }

  beforeAll(async () => {
    server = await startApiServer({ inMemory: true, port: 0, logger: pino({ level: "silent" }) });
    transport = new RestClient(kubeConfigFor(server.url, server.token));
    await installKubeVirtCrds(transport);
    app = new VirtControllerApp({ transport, logger: pino({ level: "silent" }), registry: new Registry() });
    await app.start();
  }, 60_000);

  afterAll(async () => {
    await app?.stop();
    await server?.stop();
  });

  it("Pending -> Scheduling -> Scheduled -> PreparingTarget -> TargetReady -> Running -> Succeeded", async () => {
    const vmi = newVmi("mig");
    delete vmi.metadata!.uid;
    delete vmi.metadata!.resourceVersion;
    await vmis().create(vmi);
    const source = await eventually(async () =>
      (await pods().list("default")).items.find((p) => p.metadata?.labels?.["vm.kubevirt.io/name"] === "mig"),
    );
    await runPod(source, "node01");
    await eventually(async () =>
      (await vmis().get("default", "mig")).status?.phase === "Scheduled" ? true : undefined,
    );
    // virt-handler on node01 takes over.
    await vmis().mergePatch("default", "mig", { status: { phase: "Running" } });

    const m = newMigration("mig-job", "mig");
    delete m.metadata!.uid;
    delete m.metadata!.resourceVersion;
    const created = await vmims().create(m);
    const target = await eventually(async () =>
      (await pods().list("default")).items.find(
        (p) => p.metadata?.labels?.["kubevirt.io/migrationJobUID"] === created.metadata?.uid,
      ),
    );
    expect(JSON.stringify(target.spec?.affinity)).toContain("podAntiAffinity");
    await eventually(() => phaseOf("mig-job", "Scheduling"));
    await runPod(target, "node02");
    await eventually(() => phaseOf("mig-job", "PreparingTarget"));
    const handedOff = await vmis().get("default", "mig");
    expect(handedOff.status?.migrationState).toMatchObject({
      migrationUid: created.metadata?.uid,
      targetNode: "node02",
      sourceNode: "node01",
    });
    expect(handedOff.status?.migrationState?.migrationConfiguration).toMatchObject({
      completionTimeoutPerGiB: 150,
      maxDowntimeMs: 900,
    });

    // The target handler prepares the target; the source handler starts and finishes the migration.
    const state = () => structuredClone(handedOff.status!.migrationState!);
    await vmis().mergePatch("default", "mig", {
      status: { migrationState: { ...state(), targetNodeAddress: "127.0.0.2" } },
    });
    await eventually(() => phaseOf("mig-job", "TargetReady"));
    await vmis().mergePatch("default", "mig", {
      status: { migrationState: { startTimestamp: new Date().toISOString() } },
    });
    await eventually(() => phaseOf("mig-job", "Running"));
    await vmis().mergePatch("default", "mig", {
      status: { nodeName: "node02", migrationState: { completed: true, endTimestamp: new Date().toISOString() } },
    });
    await eventually(() => phaseOf("mig-job", "Succeeded"));
    const done = await vmims().get("default", "mig-job");
    expect(done.metadata?.finalizers ?? []).not.toContain("kubevirt.io/migrationJobFinalize");
  });

  it("a standby takes over the lease when the leader stops", async () => {
    const leases = resourceClient<Lease>(transport, CORE_V1.leases);
    const timing = { leaseDurationMs: 1500, renewDeadlineMs: 1000, retryPeriodMs: 200 };
    const mk = (identity: string) =>
      new LeaderElector({
        leases,
        namespace: "default",
        name: "virt-controller",
        identity,
        logger: pino({ level: "silent" }),
        ...timing,
        onStartedLeading: () => {},
      });
    const a = mk("a");
    const b = mk("b");
    const stopA = new AbortController();
    const stopB = new AbortController();
    const runA = a.run(stopA.signal);
    await eventually(async () => (a.isLeader ? true : undefined));
    const runB = b.run(stopB.signal);
    await new Promise((r) => setTimeout(r, 500));
    expect(b.isLeader).toBe(false);
    stopA.abort();
    await runA;
    await eventually(async () => (b.isLeader ? true : undefined));
    expect((await leases.get("default", "virt-controller")).spec?.holderIdentity).toBe("b");
    stopB.abort();
    await runB;
  });
});
