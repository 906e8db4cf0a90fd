import type { ObjectKey, VirtualMachineInstance } from "@kvt/api";
import type { JsonPatchOp, ReconcileContext } from "@kvt/kube";
import { type DomainInfo, LauncherRpcError } from "@kvt/launcher-rpc";
import { createLogger } from "@kvt/observability";
import { CriticalNetworkError, PodNetworkWiringError } from "@kvt/pod-network";
import { trace } from "@opentelemetry/api";
import { describe, expect, it } from "vitest";
import type { LauncherView } from "../launchers/launcher-registry.ts";
import { type MigrationHandoff, MigrationSecretError, type MigrationSecrets } from "../migration/migration-secrets.ts";
import { type PodNetworkSetup, SECRET_DEADLINE_MS, statusPatch, VmiController } from "./vmi-controller.ts";

const baseCtx = {
  logger: createLogger({ component: "test", level: "silent" }),
  reconcileId: "r",
};
const ctx = baseCtx as unknown as ReconcileContext;
const NOW = "2026-11-22T05:00:00Z";

/** In-memory secrets: `publish` records, `exchange` answers with `exchange()` (and records what it was sent). */
function fakeSecrets(
  exchange: () => Promise<MigrationHandoff> = async () => ({ secret: "s" }),
): MigrationSecrets & { published: string[]; sent: (string | undefined)[] } {
  const held = new Map<string, MigrationHandoff>();
  const published: string[] = [];
  const sent: (string | undefined)[] = [];
  return {
    published,
    sent,
    publish: (_vmi, uid, handoff) => {
      held.set(uid, handoff);
      published.push(`${uid}:${handoff.secret}:${handoff.certificate ?? "-"}`);
    },
    holds: (uid) => held.has(uid),
    release: (uid) => void held.delete(uid),
    exchange: (_vmi, _uid, certificate) => {
      sent.push(certificate);
      return exchange();
    },
  };
}

/** Minted identities are named after their common name (the real ones are tested in @kvt/certs and the handshake). */
const mintTls = async (cn: string) => ({ certificate: `cert:${cn}`, key: `key:${cn}` });

function deepFreeze<T>(o: T): T {
  if (o && typeof o === "object") {
    for (const v of Object.values(o)) deepFreeze(v);
    Object.freeze(o);
  }
  return o;
}

const cached: VirtualMachineInstance = {
  metadata: { name: "vm1", namespace: "default", uid: "u1" },
  spec: { domain: { devices: {} } },
  status: { phase: "Scheduled", nodeName: "node01" },
};
const vmi = deepFreeze(cached);

function setup(sync: () => Promise<DomainInfo>, podNetwork?: PodNetworkSetup) {
  const info: DomainInfo = {
    protocolVersion: "v1",
    vmi: { namespace: "default", name: "vm1", uid: "u1" },
    pod: { uid: "p1" },
    pid: 1,
    state: "NoDomain",
  };
  const calls: string[] = [];
  const view = {
    socketPath: "/s",
    gone: false,
    info,
    client: {
      sync: async () => {
        calls.push("sync");
        return sync();
      },
    },
  } as unknown as LauncherView;
  const patches: JsonPatchOp[][] = [];
  const labels: Record<string, string>[] = [];
  const controller = new VmiController({
    nodeName: "node01",
    vmis: { get: (key: ObjectKey) => (key === "default/vm1" ? vmi : undefined) },
    writer: {
      patchStatus: async (_ns, _n, ops) => patches.push([...ops]),
      patchLabels: async (_ns, _n, l) => labels.push(l),
    },
    launchers: { synced: true, forVmi: (uid) => (uid === "u1" ? [view] : []) },
    secrets: fakeSecrets(),
    now: () => NOW,
    ...(podNetwork ? { podNetwork } : {}),
  });
  return { controller, calls, patches, info, labels };
}

describe("VmiController.reconcile (fake launcher and writer; cached VMI frozen)", () => {
  it("syncs a Scheduled VMI and writes Running with a test-guarded patch", async () => {
    const { controller, calls, patches, info } = setup(async () => ({ ...info, state: "Running" }));
    await controller.reconcile("default/vm1" as ObjectKey, ctx);
    expect(calls).toEqual(["sync"]);
    const ops = patches[0];
    expect(ops).toContainEqual({ op: "test", path: "/status/phase", value: "Scheduled" });
    expect(ops).toContainEqual({ op: "replace", path: "/status/phase", value: "Running" });
    expect(ops).toContainEqual({ op: "add", path: "/status/activePods", value: { p1: "node01" } });
  });

  it("labels the VMI kubevirt.io/nodeName with the node that runs it, as KubeVirt's handler does", async () => {
    const { controller, labels, info } = setup(async () => ({ ...info, state: "Running" }));
    await controller.reconcile("default/vm1" as ObjectKey, ctx);
    expect(labels).toEqual([{ "kubevirt.io/nodeName": "node01" }]);
  });

  it("a refused spec fails the VMI once and is never re-synced", async () => {
    const { controller, calls, patches } = setup(async () => {
      throw new LauncherRpcError("BadRequest", "image local/x is not in the local image store");
    });
    await controller.reconcile("default/vm1" as ObjectKey, ctx);
    await controller.reconcile("default/vm1" as ObjectKey, ctx);
    expect(calls).toEqual(["sync"]);
    expect(patches[0]).toContainEqual({ op: "replace", path: "/status/phase", value: "Failed" });
  });

  it("a pod network past rebuilding fails the VMI once, saying why; a plain wiring failure is retried", async () => {
    let tries = 0;
    let failure: Error = new PodNetworkWiringError("ip link add failed: RTNETLINK answers: Operation not permitted");
    const wiring: PodNetworkSetup = {
      ensure: async () => {
        tries++;
        throw failure;
      },
    };
    const { controller, calls, patches } = setup(async () => {
      throw new Error("not synced before the network");
    }, wiring);
    await expect(controller.reconcile("default/vm1" as ObjectKey, ctx)).rejects.toBe(failure);
    failure = new CriticalNetworkError("the pod network is bridged already (eth0-nic exists)");
    await controller.reconcile("default/vm1" as ObjectKey, ctx);
    await controller.reconcile("default/vm1" as ObjectKey, ctx);
    expect({ tries, calls }).toEqual({ tries: 2, calls: [] });
    expect(patches[0]).toContainEqual({ op: "replace", path: "/status/phase", value: "Failed" });
    const conditions = patches[0]?.find((op) => op.op === "add" && op.path === "/status/conditions");
    expect(conditions).toMatchObject({
      value: expect.arrayContaining([
        expect.objectContaining({
          type: "Synchronized",
          status: "False",
          message: "failed to configure vmi network: the pod network is bridged already (eth0-nic exists)",
        }),
      ]),
    });
  });

  it("a launcher that cannot be reached is retried by the runner (the error propagates)", async () => {
    const { controller } = setup(async () => {
      throw new LauncherRpcError("Unavailable", "launcher unreachable (ECONNREFUSED)");
    });
    await expect(controller.reconcile("default/vm1" as ObjectKey, ctx)).rejects.toMatchObject({ code: "Unavailable" });
  });
});

describe("VmiController.reconcile: at most one domain per VMI", () => {
  const running: VirtualMachineInstance = deepFreeze({
    metadata: { name: "vm1", namespace: "default", uid: "u1" },
    spec: { domain: { devices: {} } },
    status: { phase: "Running", nodeName: "node01", activePods: { p1: "node01" } },
  });
  const launcher = (pod: string, state: DomainInfo["state"], calls: string[]): LauncherView =>
    ({
      socketPath: `/s/${pod}`,
      gone: false,
      info: {
        protocolVersion: "v1",
        vmi: { namespace: "default", name: "vm1", uid: "u1" },
        pod: { uid: pod },
        pid: 1,
        state,
      },
      client: {
        sync: async () => {
          calls.push(`sync ${pod}`);
          return { state: "Running" };
        },
        kill: async () => {
          calls.push(`kill ${pod}`);
        },
      },
    }) as unknown as LauncherView;
  const controllerWith = (views: LauncherView[]): VmiController =>
    new VmiController({
      nodeName: "node01",
      vmis: { get: () => running },
      writer: { patchStatus: async () => undefined },
      launchers: { synced: true, forVmi: () => views },
      secrets: fakeSecrets(),
      now: () => NOW,
    });

  it("never boots a second launcher of a VMI whose guest runs here (a restarted handler found both)", async () => {
    const calls: string[] = [];
    // The stray launcher is listed first, as a directory scan may list it.
    const controller = controllerWith([launcher("stray", "NoDomain", calls), launcher("p1", "Running", calls)]);
    await controller.reconcile("default/vm1" as ObjectKey, ctx);
    expect(calls).toEqual([]);
  });

  it("kills a second guest of the VMI and keeps the active pod's", async () => {
    const calls: string[] = [];
    const controller = controllerWith([launcher("stray", "Running", calls), launcher("p1", "Running", calls)]);
    await controller.reconcile("default/vm1" as ObjectKey, ctx);
    expect(calls).toEqual(["kill stray"]);
  });
});

describe("VmiController.reconcile: a source handler restarted mid-migration finds no launcher", () => {
  const migrating: VirtualMachineInstance = deepFreeze({
    metadata: { name: "vm1", namespace: "default", uid: "u1" },
    spec: { domain: { devices: {} } },
    status: {
      phase: "Running",
      nodeName: "node01",
      migrationState: {
        migrationUid: "m1",
        sourceNode: "node01",
        targetNode: "node02",
        targetNodeAddress: "127.0.0.1",
        targetDirectMigrationNodePorts: { "40001": 0 },
      },
    },
  });

  it("keeps the VMI Running while the target may report, then fails it and the migration with the reason", async () => {
    let clock = 1_000_000;
    const patches: JsonPatchOp[][] = [];
    const controller = new VmiController({
      nodeName: "node01",
      vmis: { get: () => migrating },
      writer: { patchStatus: async (_ns, _n, ops) => patches.push([...ops]) },
      launchers: { synced: true, forVmi: () => [] },
      secrets: fakeSecrets(),
      now: () => NOW,
      clockMs: () => clock,
    });
    const ctx = { ...baseCtx, span: trace.getTracer("test").startSpan("reconcile") } as unknown as ReconcileContext;
    const first = await controller.reconcile("default/vm1" as ObjectKey, ctx);
    expect(patches).toEqual([]); // the old behaviour patched phase Failed (LauncherExited) here
    expect(first.requeueAfterMs).toBe(60_000);
    clock += 30_000;
    expect((await controller.reconcile("default/vm1" as ObjectKey, ctx)).requeueAfterMs).toBe(30_000);
    expect(patches).toEqual([]);
    clock += 30_000;
    await controller.reconcile("default/vm1" as ObjectKey, ctx);
    const ops = patches[0] ?? [];
    expect(ops).toContainEqual({ op: "replace", path: "/status/phase", value: "Failed" });
    const state = ops.find((o) => o.path === "/status/migrationState" && o.op === "replace");
    expect(state).toMatchObject({
      value: { failed: true, failureReason: expect.stringContaining("virt-launcher exited") },
    });
  });
});

describe("VmiController.reconcile: a target handler restarted before it held the migration secret", () => {
  const migrating: VirtualMachineInstance = deepFreeze({
    metadata: { name: "vm1", namespace: "default", uid: "u1" },
    spec: { domain: { devices: {} } },
    status: {
      phase: "Running",
      nodeName: "node01",
      migrationState: { migrationUid: "m1", sourceNode: "node01", targetNode: "node02" },
    },
  });
  const prepared: DomainInfo = {
    protocolVersion: "v1",
    vmi: { namespace: "default", name: "vm1", uid: "u1" },
    pod: { uid: "p2" },
    pid: 2,
    state: "IncomingMigration",
    migration: { migrationUid: "m1", role: "target", phase: "Ready", targetAddress: { host: "127.0.0.1", port: 4 } },
  };

  function target(
    prepare: (r: { tls?: { certificate: string } }) => Promise<{ host: string; port: number; secret: string }>,
  ) {
    const secrets = fakeSecrets();
    const prepares: string[] = [];
    const patches: JsonPatchOp[][] = [];
    const view = {
      socketPath: "/s2",
      gone: false,
      info: prepared,
      client: {
        prepareTarget: (r: { tls?: { certificate: string } }) => {
          prepares.push(`prepare ${r.tls?.certificate ?? "plain"}`);
          return prepare(r);
        },
        info: async () => prepared,
      },
    } as unknown as LauncherView;
    const controller = new VmiController({
      nodeName: "node02",
      vmis: { get: () => migrating },
      writer: { patchStatus: async (_ns, _n, ops) => void patches.push([...ops]) },
      launchers: { synced: true, forVmi: () => [view] },
      secrets,
      syncAddress: () => "10.0.0.2:8186",
      now: () => NOW,
      mintTls,
    });
    const ctx = { ...baseCtx, span: trace.getTracer("test").startSpan("reconcile") } as unknown as ReconcileContext;
    return { secrets, prepares, patches, run: () => controller.reconcile("default/vm1" as ObjectKey, ctx) };
  }

  it("asks the launcher again and holds the secret and certificate it repeats, once; publishes its own address", async () => {
    // The launcher answers the identity of its first prepare, whatever this (restarted) handler minted now.
    const t = target(async () => ({ host: "127.0.0.1", port: 4, secret: "same", certificate: "first-cert" }));
    await t.run();
    await t.run();
    expect(t.prepares).toEqual(["prepare cert:kubevirt-migration-m1-target"]);
    expect(t.secrets.published).toEqual(["m1:same:first-cert"]); // the old behaviour published nothing: the source could never connect
    const state = t.patches.flat().find((o) => o.path === "/status/migrationState" && o.op === "replace");
    expect(state).toMatchObject({ value: { targetState: { syncAddress: "10.0.0.2:8186" } } });
  });

  it("a launcher that refuses to repeat does not stop the reconcile, and is not asked again", async () => {
    const t = target(async () => {
      throw new LauncherRpcError("Conflict", "the machine is incoming");
    });
    await expect(t.run()).resolves.toBeDefined();
    await t.run();
    expect(t.secrets.published).toEqual([]);
    expect(t.prepares).toEqual(["prepare cert:kubevirt-migration-m1-target"]);
  });
});

describe("VmiController.reconcile: a source getting the migration secret from the target's handler", () => {
  const source: VirtualMachineInstance = deepFreeze({
    metadata: { name: "vm1", namespace: "default", uid: "u1" },
    spec: { domain: { devices: {} } },
    status: {
      phase: "Running",
      nodeName: "node01",
      migrationState: {
        migrationUid: "m1",
        sourceNode: "node01",
        targetNode: "node02",
        targetNodeAddress: "127.0.0.1",
        targetDirectMigrationNodePorts: { "40001": 0 },
        targetState: { syncAddress: "127.0.0.1:8186" },
      },
    },
  });
  const running: DomainInfo = {
    protocolVersion: "v1",
    vmi: { namespace: "default", name: "vm1", uid: "u1" },
    pod: { uid: "p1" },
    pid: 1,
    state: "Running",
  };

  function sourceSide(exchange: () => Promise<MigrationHandoff>, vmi = source) {
    const migrated: string[] = [];
    const patches: JsonPatchOp[][] = [];
    const view = {
      socketPath: "/s",
      gone: false,
      info: running,
      client: {
        migrate: async (r: { target: { secret: string; certificate?: string }; tls?: { certificate: string } }) =>
          void migrated.push(`${r.target.secret} ${r.target.certificate ?? "-"} ${r.tls?.certificate ?? "-"}`),
        info: async () => running,
      },
    } as unknown as LauncherView;
    const clock = { ms: 0 };
    const secrets = fakeSecrets(exchange);
    const controller = new VmiController({
      nodeName: "node01",
      vmis: { get: () => vmi },
      writer: { patchStatus: async (_ns, _n, ops) => void patches.push([...ops]) },
      launchers: { synced: true, forVmi: () => [view] },
      secrets,
      now: () => NOW,
      clockMs: () => clock.ms,
      mintTls,
    });
    const ctx = { ...baseCtx, span: trace.getTracer("test").startSpan("reconcile") } as unknown as ReconcileContext;
    const failure = (): unknown =>
      (patches.flat().find((o) => o.path === "/status/migrationState" && o.op === "replace") as { value?: unknown })
        ?.value;
    return { migrated, clock, failure, secrets, run: () => controller.reconcile("default/vm1" as ObjectKey, ctx) };
  }

  it("looks again in a second while the target is not ready, then migrates with its secret and both certificates", async () => {
    const target: { handoff?: MigrationHandoff } = {};
    const s = sourceSide(async () => {
      if (target.handoff === undefined) {
        throw new MigrationSecretError("answered 409: not prepared yet", { permanent: false });
      }
      return target.handoff;
    });
    await expect(s.run()).resolves.toEqual({ requeueAfterMs: 1000 });
    expect(s.migrated).toEqual([]);
    target.handoff = { secret: "s3cret", certificate: "target-cert" };
    await s.run();
    // The launcher pins the target's certificate and presents the identity this handler minted, once per migration:
    // the same certificate went with every exchange.
    expect(s.migrated).toEqual(["s3cret target-cert cert:kubevirt-migration-m1-source"]);
    expect(s.secrets.sent).toEqual(["cert:kubevirt-migration-m1-source", "cert:kubevirt-migration-m1-source"]);
    expect(s.failure()).toBeUndefined();
  });

  it("under migrations.disableTLS mints no certificate and migrates with the secret alone", async () => {
    const plain = deepFreeze({
      ...source,
      status: {
        ...source.status,
        migrationState: { ...source.status?.migrationState, migrationConfiguration: { disableTLS: true } },
      },
    });
    const s = sourceSide(async () => ({ secret: "s3cret" }), plain);
    await s.run();
    expect(s.secrets.sent).toEqual([undefined]);
    expect(s.migrated).toEqual(["s3cret - -"]);
  });

  it("fails the migration, saying why, when the target's handler refuses", async () => {
    const s = sourceSide(async () => {
      throw new MigrationSecretError("answered 403: not the open migration", { permanent: true });
    });
    await expect(s.run()).resolves.toEqual({});
    expect(s.migrated).toEqual([]);
    expect(s.failure()).toMatchObject({
      failed: true,
      failureReason: "Failed to get the migration secret from the target: answered 403: not the open migration",
    });
  });

  it("fails the migration once the target's handler stayed unreachable for the deadline, never waits forever", async () => {
    const s = sourceSide(async () => {
      throw new MigrationSecretError("cannot reach the target's virt-handler at 127.0.0.1:8186: ECONNREFUSED", {
        permanent: false,
      });
    });
    expect(await s.run()).toEqual({ requeueAfterMs: 1000 });
    s.clock.ms = SECRET_DEADLINE_MS - 1;
    expect(await s.run()).toEqual({ requeueAfterMs: 1000 });
    expect(s.failure()).toBeUndefined();
    s.clock.ms = SECRET_DEADLINE_MS;
    await s.run();
    expect(s.failure()).toMatchObject({
      failed: true,
      failureReason: expect.stringContaining("127.0.0.1:8186: ECONNREFUSED (for 60 s)"),
    });
    expect(s.migrated).toEqual([]);
  });
});

describe("statusPatch", () => {
  it("adds the whole status when there was none, and is empty when nothing changed", () => {
    expect(statusPatch(undefined, { phase: "Running" })).toEqual([
      { op: "add", path: "/status", value: { phase: "Running" } },
    ]);
    expect(statusPatch({ phase: "Running" }, { phase: "Running" })).toEqual([]);
  });
});
