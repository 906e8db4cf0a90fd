/**
 * The whole chain with real processes and sockets, no fakes: the local API server (its own process, HTTPS), a
 * front door that authenticates the caller and hands subresource requests to {@link AggregationProxy} (what an
 * API server does for the APIService), virt-api over HTTPS with requestheader auth, and virt-api's writes going
 * back to the API server through the impersonating REST client.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, type IncomingMessage, request, type Server } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { customResourceDefinitions } from "@kvt/api";
import { generateCa, issueCertificate } from "@kvt/certs";
import { isNotFound, loadKubeConfig, RestClient } from "@kvt/kube";
import { eventually } from "@kvt/testing";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket, { WebSocketServer } from "ws";
import { HttpHandlerClient, TemplateHandlerLocator } from "../handler/handler-client.ts";
import { RestClusterClient } from "../kube/cluster-client.ts";
import { VirtApiApp } from "../server/app.ts";
import { type RunningServer, startVirtApiServer } from "../server/server.ts";
import { webhookRoutes } from "../webhooks/admitters.ts";
import { AggregationProxy } from "./proxy.ts";

const root = new URL("../../../../", import.meta.url).pathname;
const apiserverMain = join(root, "tools/local-cluster/src/apiserver/main.ts");
const VMS = "/apis/kubevirt.io/v1/namespaces/default/virtualmachines";
const SUB = "/apis/subresources.kubevirt.io/v1/namespaces/default/virtualmachines";

function put(port: number, path: string, body: unknown): Promise<{ code: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: "127.0.0.1",
        port,
        method: "PUT",
        path,
        headers: { "content-type": "application/json", authorization: "Bearer alice" },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve({ code: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
      },
    );
    req.on("error", reject);
    req.end(JSON.stringify(body));
  });
}

describe.skipIf(!existsSync(apiserverMain))(
  "virt-api behind an aggregation proxy, acting on the local API server",
  { timeout: 120_000 },
  () => {
    let dir: string;
    let apiserver: ChildProcess;
    let transport: RestClient;
    let virtApi: RunningServer;
    let front: Server;
    let handlerServer: ReturnType<typeof createHttpsServer>;
    let handlerWss: WebSocketServer;
    const seenUsers: string[] = [];

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), "virt-api-agg-"));
      const kubeconfig = join(dir, "kubeconfig");
      apiserver = spawn(
        process.execPath,
        [apiserverMain, "--data-dir", join(dir, "data"), "--kubeconfig", kubeconfig, "--log-level", "warn"],
        { stdio: "ignore" },
      );
      await eventually(
        async () => (existsSync(kubeconfig) && readFileSync(kubeconfig, "utf8").includes("server:") ? true : undefined),
        { timeoutMs: 30_000, intervalMs: 100, what: "the API server" },
      );
      transport = new RestClient(loadKubeConfig({ kubeconfig }));
      for (const crd of customResourceDefinitions()) {
        await transport.request({
          method: "POST",
          path: "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
          body: crd,
        });
      }
      await eventually(
        async () => {
          try {
            await transport.request({ method: "GET", path: VMS });
            return true;
          } catch (error) {
            if (isNotFound(error)) return undefined; // the CRD is not served yet
            throw error;
          }
        },
        { timeoutMs: 30_000, intervalMs: 100, what: "the VM CRD" },
      );
      // The API server enforces RBAC: virt-api acts as alice, who is this cluster's admin here (the chain under test
      // is the proxy's, not authorization; apiserver/auth has those tests).
      await transport.request({
        method: "POST",
        path: "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        body: {
          apiVersion: "rbac.authorization.k8s.io/v1",
          kind: "ClusterRoleBinding",
          metadata: { name: "alice-admin" },
          roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "cluster-admin" },
          subjects: [{ apiGroup: "rbac.authorization.k8s.io", kind: "User", name: "alice" }],
        },
      });

      const ca = await generateCa();
      const serving = await issueCertificate(ca, {
        dnsNames: ["localhost", "virt-api.kubevirt.svc"],
        ipAddresses: ["127.0.0.1"],
      });
      const proxyCert = await issueCertificate(ca, { commonName: "front-proxy-client", usage: "client" });
      // A real "virt-handler" console endpoint: greets, then echoes.
      handlerServer = createHttpsServer({ cert: serving.certPem, key: serving.keyPem });
      handlerWss = new WebSocketServer({ server: handlerServer });
      handlerWss.on("connection", (ws) => {
        ws.send(Buffer.from("cloud-init: hello\r\n"));
        ws.on("message", (d: Buffer) => ws.send(Buffer.from(`echo:${d.toString()}`)));
      });
      await new Promise<void>((r) => handlerServer.listen(0, "127.0.0.1", () => r()));
      const handlerUrl = `https://localhost:${(handlerServer.address() as AddressInfo).port}`;
      const app = new VirtApiApp({
        logger: pino({ level: "silent" }),
        clientFor: (user) => {
          if (user) seenUsers.push(user.username);
          return new RestClusterClient(transport, user);
        },
        handler: new HttpHandlerClient(new TemplateHandlerLocator(`node01=${handlerUrl}`), { ca: ca.certPem }),
        webhooks: webhookRoutes(new RestClusterClient(transport), "kubevirt"),
        requestHeaderAuth: { allowedNames: ["front-proxy-client"] },
        version: "0.1.0",
      });
      virtApi = await startVirtApiServer(app, {
        certPem: serving.certPem,
        keyPem: serving.keyPem,
        clientCaPem: ca.certPem,
        host: "127.0.0.1",
        port: 0,
      });
      const proxy = new AggregationProxy({
        url: `https://127.0.0.1:${virtApi.port}`,
        caPem: ca.certPem,
        clientCertPem: proxyCert.certPem,
        clientKeyPem: proxyCert.keyPem,
      });
      // The API server's role: authenticate (here: any bearer token names the user) and route the group to the proxy.
      front = createServer((req: IncomingMessage, res) => {
        const user = {
          username: (req.headers.authorization ?? "").replace(/^Bearer /, ""),
          groups: ["system:authenticated"],
        };
        void proxy.handle(req, res, user);
      });
      front.on("upgrade", (req: IncomingMessage, socket, head: Buffer) => {
        proxy.upgrade(req, socket, head, {
          username: (req.headers.authorization ?? "").replace(/^Bearer /, ""),
          groups: [],
        });
      });
      await new Promise<void>((r) => front.listen(0, "127.0.0.1", () => r()));
    });

    afterAll(async () => {
      front?.closeAllConnections();
      await new Promise<void>((r) => (front ? front.close(() => r()) : r()));
      await virtApi?.close();
      for (const c of handlerWss?.clients ?? []) c.terminate();
      handlerWss?.close();
      handlerServer?.closeAllConnections();
      await new Promise<void>((r) => (handlerServer ? handlerServer.close(() => r()) : r()));
      if (apiserver && apiserver.exitCode === null) {
        const exited = new Promise((r) => apiserver.once("exit", r));
        apiserver.kill("SIGTERM");
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    });

    it("start of a Halted VM flips it to Always in the API server, as the proxied user", async () => {
      await transport.request({
        method: "POST",
        path: VMS,
        body: {
          apiVersion: "kubevirt.io/v1",
          kind: "VirtualMachine",
          metadata: { name: "vm-cirros" },
          spec: {
            runStrategy: "Halted",
            template: { spec: { domain: { devices: {}, resources: { requests: { memory: "128Mi" } } } } },
          },
        },
      });
      const port = (front.address() as AddressInfo).port;
      const answer = await put(port, `${SUB}/vm-cirros/start`, {});
      expect(answer.code).toBe(202);
      const vm = await transport.request<{ spec: { runStrategy: string } }>({
        method: "GET",
        path: `${VMS}/vm-cirros`,
      });
      expect(vm.spec.runStrategy).toBe("Always");
      expect(seenUsers).toContain("alice");
    });

    it("a second start is KubeVirt's 409 through the proxy", async () => {
      const port = (front.address() as AddressInfo).port;
      const answer = await put(port, `${SUB}/vm-cirros/start`, {});
      expect(answer.code).toBe(409);
      expect(JSON.parse(answer.body)).toMatchObject({
        reason: "Conflict",
        message:
          'Operation cannot be fulfilled on virtualmachine.kubevirt.io "vm-cirros": Always does not support manual start requests',
      });
    });

    it("stop, then restart of a stopped VM (409), then a Manual VM's start request lands in status", async () => {
      const port = (front.address() as AddressInfo).port;
      expect((await put(port, `${SUB}/vm-cirros/stop`, {})).code).toBe(202);
      const restart = await put(port, `${SUB}/vm-cirros/restart`, {});
      expect(restart.code).toBe(409);
      expect(restart.body).toContain("RunStategy Halted does not support manual restart requests");
      await transport.request({
        method: "PATCH",
        path: `${VMS}/vm-cirros`,
        contentType: "application/merge-patch+json",
        body: { spec: { runStrategy: "Manual" } },
      });
      expect((await put(port, `${SUB}/vm-cirros/start`, { paused: true })).code).toBe(202);
      const vm = await transport.request<{ status?: { stateChangeRequests?: unknown[] } }>({
        method: "GET",
        path: `${VMS}/vm-cirros`,
      });
      expect(vm.status?.stateChangeRequests).toEqual([{ action: "Start", data: { paused: "true" } }]);
    });

    it("a missing VM is 404 through the proxy", async () => {
      const port = (front.address() as AddressInfo).port;
      const answer = await put(port, `${SUB}/nope/start`, {});
      expect(answer.code).toBe(404);
      expect(JSON.parse(answer.body)).toMatchObject({ message: 'virtualmachine.kubevirt.io "nope" not found' });
    });

    it("the console WebSocket goes API server -> virt-api -> virt-handler and back; a missing VMI is refused", async () => {
      const port = (front.address() as AddressInfo).port;
      const vmis = "/apis/kubevirt.io/v1/namespaces/default/virtualmachineinstances";
      await transport.request({
        method: "POST",
        path: vmis,
        body: {
          apiVersion: "kubevirt.io/v1",
          kind: "VirtualMachineInstance",
          metadata: { name: "vmi-console" },
          spec: { domain: { devices: {}, resources: { requests: { memory: "128Mi" } } } },
        },
      });
      await transport.request({
        method: "PATCH",
        path: `${vmis}/vmi-console`, // KubeVirt VMIs have no status subresource
        contentType: "application/json-patch+json",
        body: [{ op: "add", path: "/status", value: { phase: "Running", nodeName: "node01" } }],
      });
      const consolePath = "/apis/subresources.kubevirt.io/v1/namespaces/default/virtualmachineinstances";
      const ws = new WebSocket(`ws://127.0.0.1:${port}${consolePath}/vmi-console/console`, ["plain.kubevirt.io"], {
        headers: { authorization: "Bearer alice" },
      });
      const got: string[] = [];
      await new Promise<void>((resolve, reject) => {
        ws.on("message", (d: Buffer) => {
          got.push(d.toString());
          if (got.length === 1) ws.send(Buffer.from("uname"));
          else resolve();
        });
        ws.on("error", reject);
      });
      ws.close();
      expect(got).toEqual(["cloud-init: hello\r\n", "echo:uname"]);
      const refused = new WebSocket(`ws://127.0.0.1:${port}${consolePath}/missing/console`, ["plain.kubevirt.io"], {
        headers: { authorization: "Bearer alice" },
      });
      const code = await new Promise<number>((resolve) => {
        refused.on("unexpected-response", (_q, res) => resolve(res.statusCode ?? 0));
        refused.on("error", () => resolve(-1));
      });
      expect(code).toBe(404);
    });
  },
);
