/**
 * virt-handler + a real virt-launcher process (native VMM, the test guest on /dev/kvm) against the local API
 * server over HTTP: Scheduled -> Running with conditions and activePods, node heartbeat and device plugin
 * registration (a kubelet's Registration service on a unix socket), pause/unpause and the
 * console through the endpoints virt-api calls, re-adoption after a handler restart without disturbing the
 * guest, graceful stop on VMI deletion, and Failed when the launcher is killed.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { request as httpsRequest } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { VirtualMachineInstance } from "@kvt/api";
import { type CertificateAndKey, generateCa, issueCertificate } from "@kvt/certs";
import { type RegisterRequest, serveRegistration, type UnixGrpcServer } from "@kvt/device-plugin";
import { CORE_V1, KUBEVIRT_V1, type KubeObject, kubeConfigFor, type Node, RestClient, resourceClient } from "@kvt/kube";
import { type ApiServerHandle, startApiServer } from "@kvt/local-cluster";
import { createLogger } from "@kvt/observability";
import { eventually, installKubeVirtCrds } from "@kvt/testing";
import { hasKvm, testGuestPath } from "@kvt/vmm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { type HandlerApp, startHandlerApp } from "./handler-app.ts";
import { VIRT_API_CLIENT_NAME } from "./http/handler-server.ts";

const logger = createLogger({ component: "test", level: "silent" });
const launcherMain = new URL("../../virt-launcher/src/main.ts", import.meta.url).pathname;
const NODE = "node01";

/** Launchers boot real guests: integration waits are generous. */
const BOOT = { timeoutMs: 60_000 };

describe.skipIf(!hasKvm())("virt-handler with a real launcher against the local API server", () => {
  let server: ApiServerHandle;
  let transport: RestClient;
  let dir: string;
  let handler: HandlerApp | undefined;
  let kubeletRegistration: UnixGrpcServer | undefined;
  const registrations: RegisterRequest[] = [];
  const launchers: ChildProcess[] = [];
  const vmis = () =>
    resourceClient<VirtualMachineInstance & KubeObject>(transport, KUBEVIRT_V1.virtualMachineInstances);
  const nodes = () => resourceClient<Node>(transport, CORE_V1.nodes);
  const socketDir = () => join(dir, "sockets");
  let ca: CertificateAndKey;
  let serving: CertificateAndKey;
  let virtApi: CertificateAndKey;
  /** PUT as virt-api does: mutual TLS with its client certificate; resolves with status and body. */
  const put = (url: string): Promise<{ status: number; body: string }> =>
    new Promise((resolve, reject) => {
      const req = httpsRequest(
        url,
        { method: "PUT", ca: ca.certPem, cert: virtApi.certPem, key: virtApi.keyPem },
        (res) => {
          let body = "";
          res.on("data", (c: Buffer) => {
            body += c.toString();
          });
          res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
        },
      );
      req.on("error", reject);
      req.end("{}");
    });

  const startHandler = async (): Promise<HandlerApp> =>
    startHandlerApp({
      tls: { cert: serving.certPem, key: serving.keyPem, ca: ca.certPem },
      nodeName: NODE,
      kubeConfig: kubeConfigFor(server.url, server.token),
      socketDirs: [socketDir()],
      logger,
      port: 0,
      host: "127.0.0.1",
      heartbeatPeriodMs: 60_000,
      workers: 2,
      devicePluginsDir: join(dir, "device-plugins"),
    });

  /** Creates a VMI of the test guest, marks it Scheduled on NODE (virt-controller's part) and starts its launcher. */
  async function scheduledVmi(name: string, podUid: string): Promise<{ uid: string; launcher: ChildProcess }> {
    const created = await vmis().create({
      apiVersion: "kubevirt.io/v1",
      kind: "VirtualMachineInstance",
      metadata: { name, namespace: "default" },
      spec: {
        domain: {
          devices: {},
          memory: { guest: "64Mi" },
          firmware: {
            kernelBoot: {
              kernelArgs: "ws=4 every=256 lines=1000000 rate=20",
              container: { image: "local/test-guest" },
            },
          },
        },
        terminationGracePeriodSeconds: 5,
      },
    });
    const uid = created.metadata!.uid!;
    await vmis().mergePatch("default", name, { status: { phase: "Scheduled", nodeName: NODE } });
    const launcher = spawn(
      process.execPath,
      [launcherMain, "--namespace", "default", "--name", name, "--uid", uid, "--log-level", "warn"],
      {
        env: {
          ...process.env,
          KUBEVIRT_SOCKET_DIR: socketDir(),
          KUBEVIRT_POD_DIR: join(dir, podUid),
          KVT_IMAGE_STORE: join(dir, "images"),
          KUBEVIRT_USE_EMULATION: "never",
          POD_UID: podUid,
          POD_NAME: `virt-launcher-${name}-x`,
        },
        stdio: ["ignore", "ignore", "inherit"],
      },
    );
    launchers.push(launcher);
    return { uid, launcher };
  }

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "kvt-h-"));
    const image = join(dir, "images", "local", "test-guest", "latest");
    mkdirSync(image, { recursive: true });
    symlinkSync(testGuestPath(), join(image, "test-guest.elf"));
    writeFileSync(
      join(image, "image.json"),
      JSON.stringify({ schemaVersion: 1, kernel: "test-guest.elf", cmdline: "", pvmSafe: true }),
    );
    ca = await generateCa("kubevirt-ca");
    serving = await issueCertificate(ca, { ipAddresses: ["127.0.0.1"] });
    virtApi = await issueCertificate(ca, { commonName: VIRT_API_CLIENT_NAME, usage: "client" });
    server = await startApiServer({
      inMemory: true,
      port: 0,
      logger: createLogger({ component: "apiserver", level: "silent" }),
    });
    transport = new RestClient(kubeConfigFor(server.url, server.token));
    await installKubeVirtCrds(transport);
    await nodes().create({ apiVersion: "v1", kind: "Node", metadata: { name: NODE } });
    mkdirSync(join(dir, "device-plugins"), { mode: 0o700 });
    kubeletRegistration = await serveRegistration(join(dir, "device-plugins", "kubelet.sock"), async (r) => {
      registrations.push(r);
    });
    handler = await startHandler();
  }, 120_000);

  afterAll(async () => {
    await handler?.stop();
    await kubeletRegistration?.close(0);
    for (const l of launchers) l.kill("SIGKILL");
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("registers its device plugins with the kubelet, then heartbeats its node schedulable", async () => {
    expect(registrations.map((r) => [r.resourceName, r.endpoint]).sort()).toEqual([
      ["devices.kubevirt.io/kvm", "kubevirt-kvm.sock"],
      ["devices.kubevirt.io/tun", "kubevirt-tun.sock"],
      ["devices.kubevirt.io/vhost-net", "kubevirt-vhost-net.sock"],
    ]);
    const node = await nodes().get("", NODE);
    expect(node.metadata?.labels?.["kubevirt.io/schedulable"]).toBe("true");
    expect(node.metadata?.annotations?.["kubevirt.io/heartbeat"]).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    // Capacity is the kubelet's to report, from the plugins' device lists: the handler writes no Node status.
    expect(node.status?.capacity?.["devices.kubevirt.io/kvm"]).toBeUndefined();
  });

  it("runs a Scheduled VMI, serves pause/unpause and the console, re-adopts it after a restart, and stops it on delete", async () => {
    const { launcher } = await scheduledVmi("guest1", "0a1b2c3d-0000-4000-8000-000000000001");
    const running = await eventually(async () => {
      const v = await vmis().get("default", "guest1");
      return v.status?.phase === "Running" ? v : undefined;
    }, BOOT);
    expect(running.status?.conditions?.find((c) => c.type === "Ready")?.status).toBe("True");
    expect(running.status?.conditions?.find((c) => c.type === "LiveMigratable")?.status).toBe("True");
    expect(running.status?.activePods).toEqual({ "0a1b2c3d-0000-4000-8000-000000000001": NODE });
    expect(running.status?.phaseTransitionTimestamps?.map((t) => t.phase)).toEqual(["Running"]);

    const base = `https://127.0.0.1:${handler!.port}/v1/namespaces/default/virtualmachineinstances/guest1`;
    expect((await put(`${base}/pause`)).status).toBe(200);
    await eventually(
      async () => (await vmis().get("default", "guest1")).status?.conditions?.some((c) => c.type === "Paused"),
      BOOT,
    );
    const again = await put(`${base}/pause`);
    expect(again.status).toBe(409);
    expect(JSON.parse(again.body)).toMatchObject({ kind: "Status", code: 409 });
    expect((await put(`${base}/unpause`)).status).toBe(200);
    await eventually(
      async () => !(await vmis().get("default", "guest1")).status?.conditions?.some((c) => c.type === "Paused"),
      BOOT,
    );

    const ws = new WebSocket(
      `wss://127.0.0.1:${handler!.port}/v1/namespaces/default/virtualmachineinstances/guest1/console`,
      ["plain.kubevirt.io"],
      { ca: ca.certPem, cert: virtApi.certPem, key: virtApi.keyPem },
    );
    let text = "";
    ws.on("message", (d: Buffer) => {
      text += d.toString();
    });
    await eventually(() => /kvt-guest progress n=\d+/.test(text), BOOT);
    ws.close();

    // A handler restart re-adopts the running launcher: the guest keeps its progress, the VMI stays Running.
    await handler!.stop();
    handler = await startHandler();
    const before = (await vmis().get("default", "guest1")).status!;
    await new Promise((r) => setTimeout(r, 500));
    const after = (await vmis().get("default", "guest1")).status!;
    expect(after.phase).toBe("Running");
    expect(after.phaseTransitionTimestamps).toEqual(before.phaseTransitionTimestamps);
    expect(launcher.exitCode).toBeNull();

    // Deleting the VMI (virt-controller's finalizer keeps it visible) shuts the guest down within its grace period.
    await vmis().mergePatch("default", "guest1", {
      metadata: { finalizers: ["kubevirt.io/foregroundDeleteVirtualMachine"] },
    });
    await vmis().delete("default", "guest1");
    const code = await new Promise<number | null>((resolve) => launcher.once("exit", (c) => resolve(c)));
    expect(code).toBe(0);
    const done = await eventually(async () => {
      const v = await vmis().get("default", "guest1");
      return v.status?.phase === "Succeeded" ? v : undefined;
    }, BOOT);
    expect(done.status?.conditions?.find((c) => c.type === "Ready")).toMatchObject({
      status: "False",
      reason: "GuestNotRunning",
    });
    await vmis().mergePatch("default", "guest1", { metadata: { finalizers: [] } });
  }, 180_000);

  it("fails the VMI when its launcher is killed", async () => {
    const { launcher } = await scheduledVmi("guest2", "0a1b2c3d-0000-4000-8000-000000000002");
    await eventually(async () => (await vmis().get("default", "guest2")).status?.phase === "Running", BOOT);
    launcher.kill("SIGKILL");
    const failed = await eventually(async () => {
      const v = await vmis().get("default", "guest2");
      return v.status?.phase === "Failed" ? v : undefined;
    }, BOOT);
    expect(failed.status?.reason).toBe("LauncherExited");
  }, 120_000);

  it("shuts down the launcher of a VMI that is deleted outright", async () => {
    const { launcher } = await scheduledVmi("guest3", "0a1b2c3d-0000-4000-8000-000000000003");
    await eventually(async () => (await vmis().get("default", "guest3")).status?.phase === "Running", BOOT);
    const exited = new Promise<number | null>((resolve) => launcher.once("exit", (c) => resolve(c)));
    await vmis().delete("default", "guest3");
    expect(await exited).toBe(0);
  }, 120_000);
});
