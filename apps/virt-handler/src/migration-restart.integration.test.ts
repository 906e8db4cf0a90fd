/**
 * Both handlers down while a migration completes, the source's handler back first (deterministic, no cluster): the
 * test plays virt-controller (it writes migrationState) and, while the source handler is down, the source handler's
 * one command (it sends `migrate` to the source launcher itself). The guest is the test guest under QEMU TCG.
 *
 *   source handler stopped -> target handler prepares, the test fetches the secret from it -> target handler
 *   stopped -> migrate -> the
 *   source launcher exits (Migrated) -> source handler restarted: it finds no launcher and must keep the VMI as it
 *   is (before: Failed, LauncherExited) -> target handler restarted: it takes the VMI over (nodeName, completed).
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { VirtualMachineInstance } from "@kvt/api";
import { generateCa, issueCertificate } from "@kvt/certs";
import { CORE_V1, KUBEVIRT_V1, type KubeObject, kubeConfigFor, type Node, RestClient, resourceClient } from "@kvt/kube";
import { isLauncherSocketName, LauncherClient } from "@kvt/launcher-rpc";
import { type ApiServerHandle, startApiServer } from "@kvt/local-cluster";
import { createLogger } from "@kvt/observability";
import { eventually, installKubeVirtCrds } from "@kvt/testing";
import { testGuestPath } from "@kvt/vmm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type HandlerApp, startHandlerApp } from "./handler-app.ts";
import { migrationOptionsOf } from "./migration/migration-options.ts";
import { HandlerMigrationSecrets, VIRT_HANDLER_NAME } from "./migration/migration-secrets.ts";
import { mintLauncherTls } from "./vmi/vmi-controller.ts";

const logger = createLogger({ component: "test", level: (process.env.TEST_LOG_LEVEL ?? "silent") as "silent" });
const launcherMain = new URL("../../virt-launcher/src/main.ts", import.meta.url).pathname;

function hasQemu(): boolean {
  try {
    execFileSync("qemu-system-x86_64", ["--version"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

type Vmi = VirtualMachineInstance & KubeObject;

describe.skipIf(!hasQemu())("a migration completed while both handlers were down", () => {
  let server: ApiServerHandle;
  let transport: RestClient;
  let dir: string;
  let tls: { cert: string; key: string; ca: string };
  const handlers = new Map<string, HandlerApp>();
  const launchers: ChildProcess[] = [];
  const vmis = () => resourceClient<Vmi>(transport, KUBEVIRT_V1.virtualMachineInstances);

  function launch(node: string, name: string, uid: string, podUid: string): ChildProcess {
    const p = spawn(
      process.execPath,
      [launcherMain, "--namespace", "default", "--name", name, "--uid", uid, "--log-level", "warn"],
      {
        env: {
          ...process.env,
          KUBEVIRT_SOCKET_DIR: join(dir, node),
          KUBEVIRT_POD_DIR: join(dir, podUid),
          KVT_IMAGE_STORE: join(dir, "images"),
          KUBEVIRT_USE_EMULATION: "always",
          POD_UID: podUid,
          POD_NAME: `virt-launcher-${name}-${node}`,
        },
        stdio: ["ignore", "ignore", "inherit"],
        detached: true, // its own process group, so the cleanup also takes the QEMU it starts
      },
    );
    launchers.push(p);
    return p;
  }

  async function startHandler(node: string): Promise<void> {
    handlers.set(
      node,
      await startHandlerApp({
        nodeName: node,
        kubeConfig: kubeConfigFor(server.url, server.token),
        socketDirs: [join(dir, node)],
        logger,
        port: 0,
        host: "127.0.0.1",
        tls,
        workers: 2,
      }),
    );
  }

  async function stopHandler(node: string): Promise<void> {
    await handlers.get(node)?.stop();
    handlers.delete(node);
  }

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "kvt-mr-"));
    const image = join(dir, "images", "local", "test-guest", "latest");
    mkdirSync(image, { recursive: true });
    symlinkSync(testGuestPath(), join(image, "test-guest.elf"));
    writeFileSync(
      join(image, "image.json"),
      JSON.stringify({ schemaVersion: 1, kernel: "test-guest.elf", cmdline: "", pvmSafe: true }),
    );
    server = await startApiServer({
      inMemory: true,
      port: 0,
      logger: createLogger({ component: "apiserver", level: "silent" }),
    });
    transport = new RestClient(kubeConfigFor(server.url, server.token));
    await installKubeVirtCrds(transport);
    const ca = await generateCa("kubevirt-ca");
    const serving = await issueCertificate(ca, {
      commonName: VIRT_HANDLER_NAME,
      ipAddresses: ["127.0.0.1"],
      usage: "both",
    });
    tls = { cert: serving.certPem, key: serving.keyPem, ca: ca.certPem };
    for (const node of ["node01", "node02"]) {
      await resourceClient<Node>(transport, CORE_V1.nodes).create({
        apiVersion: "v1",
        kind: "Node",
        metadata: { name: node },
      });
      await startHandler(node);
    }
  }, 120_000);

  afterAll(async () => {
    for (const node of [...handlers.keys()]) await stopHandler(node);
    for (const l of launchers) {
      try {
        if (l.pid) process.kill(-l.pid, "SIGKILL");
      } catch {
        // Already gone with its whole group.
      }
    }
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("the source handler back first keeps the VMI; the target handler back takes it over", async () => {
    const created = await vmis().create({
      apiVersion: "kubevirt.io/v1",
      kind: "VirtualMachineInstance",
      metadata: { name: "mr", namespace: "default" },
      spec: {
        domain: {
          devices: {},
          memory: { guest: "64Mi" },
          firmware: {
            kernelBoot: { kernelArgs: "ws=4 every=256 lines=1000000 rate=5", container: { image: "local/test-guest" } },
          },
        },
      },
    });
    const uid = created.metadata!.uid!;
    await vmis().mergePatch("default", "mr", { status: { phase: "Scheduled", nodeName: "node01" } });
    const source = launch("node01", "mr", uid, "cccccccc-0000-4000-8000-000000000001");
    await eventually(async () => (await vmis().get("default", "mr")).status?.phase === "Running", {
      timeoutMs: 120_000,
    });

    // The source handler goes down before the migration: the test sends `migrate` in its place.
    await stopHandler("node01");
    launch("node02", "mr", uid, "dddddddd-0000-4000-8000-000000000002");
    await vmis().mergePatch("default", "mr", {
      status: {
        migrationState: {
          migrationUid: "mr-mig-1",
          sourceNode: "node01",
          sourcePod: "virt-launcher-mr-node01",
          targetNode: "node02",
          targetPod: "virt-launcher-mr-node02",
        },
      },
    });
    const published = await eventually(
      async () => {
        const v = await vmis().get("default", "mr");
        return v.status?.migrationState?.targetNodeAddress ? v : undefined;
      },
      { timeoutMs: 120_000 },
    );
    // What the source handler would do: mint its launcher's identity, send the certificate to the target's handler
    // (mutual TLS, as node01) and get the secret and the target launcher's certificate.
    const sourceTls = await mintLauncherTls("kubevirt-migration-mr-mig-1-source");
    const handoff = await new HandlerMigrationSecrets({ nodeName: "node01", tls: () => tls }).exchange(
      published,
      "mr-mig-1",
      sourceTls.certificate,
    );
    await stopHandler("node02");

    const ms = published.status!.migrationState!;
    const port = Number(Object.keys(ms.targetDirectMigrationNodePorts ?? {})[0]);
    const socket = readdirSync(join(dir, "node01")).find(isLauncherSocketName)!;
    const client = new LauncherClient(join(dir, "node01", socket), { timeoutMs: 10_000 });
    await client.migrate({
      migrationUid: "mr-mig-1",
      target: { host: ms.targetNodeAddress!, port, ...handoff },
      options: migrationOptionsOf(undefined),
      tls: sourceTls,
    });
    const exit = source.exitCode ?? (await new Promise<number | null>((r) => source.once("exit", (c) => r(c))));
    expect(exit).toBe(0); // Migrated: the guest runs on node02 now

    // The source handler comes back first and finds no launcher for a VMI that still names node01.
    await startHandler("node01");
    await new Promise((r) => setTimeout(r, 2500));
    const waiting = await vmis().get("default", "mr");
    expect(waiting.status?.phase).toBe("Running"); // the old behaviour: Failed (LauncherExited)
    expect(waiting.status?.nodeName).toBe("node01");
    expect(waiting.status?.migrationState?.failed).toBeUndefined();

    // The target handler comes back and takes the VMI over from what its launcher reports.
    await startHandler("node02");
    const moved = await eventually(
      async () => {
        const v = await vmis().get("default", "mr");
        return v.status?.nodeName === "node02" && v.status.migrationState?.completed ? v : undefined;
      },
      { timeoutMs: 30_000 },
    );
    expect(moved.metadata?.uid).toBe(uid);
    expect(moved.status?.phase).toBe("Running");
    expect(moved.status?.migrationState).toMatchObject({ targetNodeDomainDetected: true, sourceNode: "node01" });
    expect(moved.status?.migrationState?.failed).toBeUndefined();
    expect(moved.status?.activePods).toEqual({ "dddddddd-0000-4000-8000-000000000002": "node02" });
    // Ready on the target: the new owner reports the running guest.
    await eventually(
      async () => {
        const v = await vmis().get("default", "mr");
        return v.status?.conditions?.find((c) => c.type === "Ready")?.status === "True" ? v : undefined;
      },
      { timeoutMs: 30_000 },
    );
  }, 300_000);
});
