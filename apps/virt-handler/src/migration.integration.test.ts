/**
 * A live migration driven by two virt-handlers (node01 -> node02), each with its own launcher process, against the
 * local API server: the test plays virt-controller (it writes migrationUid, source/target node and pod into
 * migrationState). The guest is the test guest under QEMU TCG (the backend that can migrate today). Checks both
 * halves of migrationState, the secret handoff, nodeName moving to the target and the source launcher exiting.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { VirtualMachineInstance } from "@kvt/api";
import { generateCa, issueCertificate } from "@kvt/certs";
import { CORE_V1, KUBEVIRT_V1, type KubeObject, kubeConfigFor, type Node, RestClient, resourceClient } from "@kvt/kube";
import { type ApiServerHandle, startApiServer } from "@kvt/local-cluster";
import { createLogger } from "@kvt/observability";
import { eventually, installKubeVirtCrds } from "@kvt/testing";
import { testGuestPath } from "@kvt/vmm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type HandlerApp, startHandlerApp } from "./handler-app.ts";
import { VIRT_HANDLER_NAME } from "./migration/migration-secrets.ts";

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

describe.skipIf(!hasQemu())("live migration between two handlers", () => {
  let server: ApiServerHandle;
  let transport: RestClient;
  let dir: string;
  const handlers: HandlerApp[] = [];
  const launchers: ChildProcess[] = [];
  const vmis = () =>
    resourceClient<VirtualMachineInstance & KubeObject>(transport, KUBEVIRT_V1.virtualMachineInstances);

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
        // Its own process group, so the cleanup below also takes the QEMU it starts (as a pod's cgroup would).
        detached: true,
      },
    );
    launchers.push(p);
    return p;
  }

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "kvt-m-"));
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
    // Also each handler's client certificate towards the other (the migration secret), as virt-controller issues it.
    const serving = await issueCertificate(ca, {
      commonName: VIRT_HANDLER_NAME,
      ipAddresses: ["127.0.0.1"],
      usage: "both",
    });
    for (const node of ["node01", "node02"]) {
      await resourceClient<Node>(transport, CORE_V1.nodes).create({
        apiVersion: "v1",
        kind: "Node",
        metadata: { name: node },
      });
      handlers.push(
        await startHandlerApp({
          nodeName: node,
          kubeConfig: kubeConfigFor(server.url, server.token),
          socketDirs: [join(dir, node)],
          logger,
          port: 0,
          host: "127.0.0.1",
          tls: { cert: serving.certPem, key: serving.keyPem, ca: ca.certPem },
          workers: 2,
        }),
      );
    }
  }, 120_000);

  afterAll(async () => {
    for (const h of handlers) await h.stop();
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

  it("moves a running guest to node02: target published, source migrates, nodeName and activePods follow", async () => {
    const created = await vmis().create({
      apiVersion: "kubevirt.io/v1",
      kind: "VirtualMachineInstance",
      metadata: { name: "mig", namespace: "default" },
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
    await vmis().mergePatch("default", "mig", { status: { phase: "Scheduled", nodeName: "node01" } });
    const source = launch("node01", "mig", uid, "aaaaaaaa-0000-4000-8000-000000000001");
    await eventually(async () => (await vmis().get("default", "mig")).status?.phase === "Running", {
      timeoutMs: 120_000,
    });

    // virt-controller's part: the target pod runs on node02 and migrationState names both sides.
    launch("node02", "mig", uid, "bbbbbbbb-0000-4000-8000-000000000002");
    await vmis().mergePatch("default", "mig", {
      status: {
        migrationState: {
          migrationUid: "mig-uid-1",
          sourceNode: "node01",
          sourcePod: "virt-launcher-mig-node01",
          targetNode: "node02",
          targetPod: "virt-launcher-mig-node02",
          migrationConfiguration: { allowAutoConverge: true, completionTimeoutPerGiB: 150, progressTimeout: 150 },
        },
      },
    });
    const moved = await eventually(
      async () => {
        const v = await vmis().get("default", "mig");
        return v.status?.nodeName === "node02" && v.status.migrationState?.targetNodeDomainDetected ? v : undefined;
      },
      { timeoutMs: 150_000 },
    );
    const ms = moved.status!.migrationState!;
    expect(ms).toMatchObject({ completed: true, targetNodeAddress: "127.0.0.1", mode: "PreCopy" });
    expect(ms.failed).toBeUndefined();
    // Where the source's handler fetched the secret: the target handler's own server (no Secret in the API server).
    expect(ms.targetState?.syncAddress).toBe(`127.0.0.1:${handlers[1]?.port}`);
    expect(Object.keys(ms.targetDirectMigrationNodePorts ?? {})).toHaveLength(1);
    expect(moved.status?.phase).toBe("Running");
    expect(moved.status?.activePods).toEqual({ "bbbbbbbb-0000-4000-8000-000000000002": "node02" });
    const exit = source.exitCode ?? (await new Promise<number | null>((r) => source.once("exit", (c) => r(c))));
    expect(exit).toBe(0);
  }, 300_000);
});
