/**
 * A virt-handler (re)started while a migration to its node is open publishes its migration-secret address
 * (`migrationState.targetState.syncAddress`) with the target it prepares, so the source handler can fetch the secret
 * at once (no guest, no cluster: the local API server, and an in-process launcher that prepares a target).
 *
 * Before the fix the handler reconciled before its server listened: a slow device plugin registration (the heartbeat
 * waits for it) let the first reconcile prepare the target and write the status without the address, and nothing
 * asked again until the informer's 30 s resync. e2e migration-handler-kill's target-preparing case waited for it.
 */
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { VirtualMachineInstance } from "@kvt/api";
import { generateCa, issueCertificate, mintMigrationCertificate } from "@kvt/certs";
import { serveRegistration, type UnixGrpcServer } from "@kvt/device-plugin";
import { CORE_V1, KUBEVIRT_V1, type KubeObject, kubeConfigFor, type Node, RestClient, resourceClient } from "@kvt/kube";
import {
  type DomainInfo,
  LauncherServer,
  type LauncherService,
  launcherSocketPath,
  type MigrationTarget,
} from "@kvt/launcher-rpc";
import { type ApiServerHandle, startApiServer } from "@kvt/local-cluster";
import { createLogger } from "@kvt/observability";
import { eventually, installKubeVirtCrds } from "@kvt/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type HandlerApp, startHandlerApp } from "./handler-app.ts";
import { HandlerMigrationSecrets, VIRT_HANDLER_NAME } from "./migration/migration-secrets.ts";

const logger = createLogger({ component: "test", level: (process.env.TEST_LOG_LEVEL ?? "silent") as "silent" });
/** How long the test's kubelet takes to answer each device plugin's registration (the heartbeat waits for it). */
const REGISTRATION_MS = 3000;
const MIGRATION = "mig-start-1";

type Vmi = VirtualMachineInstance & KubeObject;

/**
 * A target launcher as far as the handler sees it: NoDomain until prepare-target, then a listener Ready for
 * `migrationUid` (announced on the event stream, as virt-launcher does). Everything else is refused.
 */
async function targetLauncher(
  socketPath: string,
  vmi: { namespace: string; name: string; uid: string },
  target: MigrationTarget,
): Promise<{ server: LauncherServer; prepares: () => number; certificate: () => string; pinned: string[] }> {
  let info: DomainInfo = { protocolVersion: "v1", vmi, pod: {}, pid: process.pid, state: "NoDomain" };
  let prepares = 0;
  let certificate = "";
  const pinned: string[] = [];
  const sink: { server?: LauncherServer } = {};
  const answers: Partial<LauncherService> = {
    info: () => info,
    prepareTarget: async (request) => {
      prepares++;
      info = {
        ...info,
        state: "IncomingMigration",
        migration: {
          migrationUid: request.migrationUid,
          role: "target",
          phase: "Ready",
          startTime: new Date().toISOString(),
          targetAddress: { host: target.host, port: target.port },
        },
      };
      sink.server?.publish({ type: "domain", transition: "incoming-ready", info });
      certificate = request.tls?.certificate ?? ""; // a real launcher answers its identity's certificate
      return { ...target, certificate };
    },
    sourceCertificate: async (request) => {
      pinned.push(request.certificate);
    },
  };
  const service = new Proxy(answers, {
    get: (t, key) =>
      key in t ? t[key as keyof LauncherService] : () => Promise.reject(new Error(`${String(key)}: not in this fake`)),
  }) as LauncherService;
  const server = new LauncherServer({ socketPath, service, logger });
  sink.server = server;
  await server.listen();
  return { server, prepares: () => prepares, certificate: () => certificate, pinned };
}

describe("a virt-handler started while a migration to its node is open", () => {
  let api: ApiServerHandle;
  let transport: RestClient;
  let dir: string;
  let tls: { cert: string; key: string; ca: string };
  let kubelet: UnixGrpcServer | undefined;
  let launcher: LauncherServer | undefined;
  let handler: HandlerApp | undefined;
  const vmis = () => resourceClient<Vmi>(transport, KUBEVIRT_V1.virtualMachineInstances);

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "kvt-hs-"));
    api = await startApiServer({
      inMemory: true,
      port: 0,
      logger: createLogger({ component: "apiserver", level: "silent" }),
    });
    transport = new RestClient(kubeConfigFor(api.url, api.token));
    await installKubeVirtCrds(transport);
    await resourceClient<Node>(transport, CORE_V1.nodes).create({
      apiVersion: "v1",
      kind: "Node",
      metadata: { name: "node02" },
    });
    const ca = await generateCa("kubevirt-ca");
    const serving = await issueCertificate(ca, {
      commonName: VIRT_HANDLER_NAME,
      ipAddresses: ["127.0.0.1"],
      usage: "both",
    });
    tls = { cert: serving.certPem, key: serving.keyPem, ca: ca.certPem };
  }, 60_000);

  afterAll(async () => {
    await handler?.stop();
    await launcher?.close();
    await kubelet?.close();
    await api?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("publishes its syncAddress with the prepared target at once, and the source gets the secret", async () => {
    const created = await vmis().create({
      apiVersion: "kubevirt.io/v1",
      kind: "VirtualMachineInstance",
      metadata: { name: "hs", namespace: "default" },
      spec: { domain: { devices: {}, memory: { guest: "64Mi" } } },
    });
    const uid = created.metadata!.uid!;
    // virt-controller's part: the VMI runs on node01 and migrates to node02.
    await vmis().mergePatch("default", "hs", {
      status: {
        phase: "Running",
        nodeName: "node01",
        migrationState: {
          migrationUid: MIGRATION,
          sourceNode: "node01",
          sourcePod: "virt-launcher-hs-source",
          targetNode: "node02",
          targetPod: "virt-launcher-hs-target",
        },
      },
    });
    // The target pod's launcher is up, not prepared yet (its previous handler was killed before preparing it).
    const sockets = join(dir, "sockets");
    mkdirSync(sockets, { mode: 0o700 });
    const target = { host: "127.0.0.1", port: 49_152, secret: "0123456789abcdef0123456789abcdef" };
    const fake = await targetLauncher(
      launcherSocketPath(sockets, "hs-target"),
      { namespace: "default", name: "hs", uid },
      target,
    );
    launcher = fake.server;
    // A kubelet slow to register the device plugins: the handler's first heartbeat waits for them.
    const plugins = join(dir, "device-plugins");
    mkdirSync(plugins, { mode: 0o700 });
    kubelet = await serveRegistration(
      join(plugins, "kubelet.sock"),
      () => new Promise<void>((r) => setTimeout(r, REGISTRATION_MS)),
    );

    handler = await startHandlerApp({
      nodeName: "node02",
      kubeConfig: kubeConfigFor(api.url, api.token),
      socketDirs: [sockets],
      devicePluginsDir: plugins,
      logger,
      port: 0,
      host: "127.0.0.1",
      tls,
      heartbeatPeriodMs: 60_000,
      workers: 2,
    });
    expect(fake.prepares()).toBeGreaterThan(0); // prepared while the heartbeat waited for the kubelet

    // Well within the informer's 30 s resync, which was the only thing to publish the address before.
    const published = await eventually(
      async () => {
        const v = await vmis().get("default", "hs");
        return v.status?.migrationState?.targetState?.syncAddress ? v : undefined;
      },
      { timeoutMs: 5000, what: "the target's syncAddress" },
    );
    const ms = published.status!.migrationState!;
    expect(ms.targetState?.syncAddress).toBe(`127.0.0.1:${handler.port}`);
    expect(ms.targetNodeAddress).toBe(target.host);
    // What the source handler does next: send its launcher's certificate to the target's handler (mutual TLS, as
    // node01) and get the secret and the target launcher's certificate, minted by the target handler for it.
    const sourceCertificate = (await mintMigrationCertificate("kubevirt-migration-source")).certPem;
    const handoff = await new HandlerMigrationSecrets({ nodeName: "node01", tls: () => tls }).exchange(
      published,
      MIGRATION,
      sourceCertificate,
    );
    expect(handoff.secret).toBe(target.secret);
    expect(handoff.certificate).toMatch(/^-----BEGIN CERTIFICATE-----/);
    expect(handoff.certificate).toBe(fake.certificate());
    expect(fake.pinned).toEqual([sourceCertificate]); // pinned in the target launcher before the answer
  }, 30_000);
});
