import { createServer as createHttpsServer, request } from "node:https";
import type { AddressInfo } from "node:net";
import { generateCa, issueCertificate } from "@kvt/certs";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket, { WebSocketServer } from "ws";
import { FakeCluster, newVm, newVmi } from "../fake/fake-cluster.ts";
import { CONSOLE_SUBPROTOCOL, HttpHandlerClient, TemplateHandlerLocator } from "../handler/handler-client.ts";
import { webhookRoutes } from "../webhooks/admitters.ts";
import { VirtApiApp } from "./app.ts";
import type { UserInfo } from "./identity.ts";
import { type RunningServer, startVirtApiServer } from "./server.ts";

const ca = await generateCa();
const serving = await issueCertificate(ca, { dnsNames: ["localhost"], ipAddresses: ["127.0.0.1"] });
const proxyClient = await issueCertificate(ca, { commonName: "front-proxy-client", usage: "client" });
const SUB = "/apis/subresources.kubevirt.io/v1/namespaces/default";

interface Answer {
  code: number;
  body: string;
}

function call(
  port: number,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
  withCert = true,
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const req = request(
      {
        host: "127.0.0.1",
        port,
        method,
        path,
        ca: ca.certPem,
        ...(withCert ? { cert: proxyClient.certPem, key: proxyClient.keyPem } : {}),
        headers: { ...(payload ? { "Content-Type": "application/json" } : {}), ...headers },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve({ code: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
      },
    );
    req.on("error", reject);
    req.end(payload);
  });
}

describe("virt-api over HTTPS", () => {
  const cluster = new FakeCluster();
  const users: Array<UserInfo | undefined> = [];
  let server: RunningServer;
  let handlerServer: ReturnType<typeof createHttpsServer>;
  let handlerWss: WebSocketServer;
  const handlerPaths: string[] = [];

  beforeAll(async () => {
    // A real WebSocket "virt-handler" serving the console contract: it echoes bytes upper-cased.
    handlerServer = createHttpsServer({ cert: serving.certPem, key: serving.keyPem });
    handlerWss = new WebSocketServer({
      server: handlerServer,
      handleProtocols: (p) => (p.has(CONSOLE_SUBPROTOCOL) ? CONSOLE_SUBPROTOCOL : false),
    });
    handlerWss.on("connection", (ws, req) => {
      handlerPaths.push(req.url ?? "");
      ws.send(Buffer.from("login: "));
      ws.on("message", (data: Buffer) => ws.send(Buffer.from(data.toString().toUpperCase())));
    });
    await new Promise<void>((r) => handlerServer.listen(0, "127.0.0.1", () => r()));
    const handlerPort = (handlerServer.address() as AddressInfo).port;
    const app = new VirtApiApp({
      logger: pino({ level: "silent" }),
      clientFor: (user) => {
        users.push(user);
        return cluster;
      },
      handler: new HttpHandlerClient(new TemplateHandlerLocator(`https://localhost:${handlerPort}`), {
        ca: ca.certPem,
      }),
      webhooks: webhookRoutes(cluster, "kubevirt"),
      requestHeaderAuth: { allowedNames: ["front-proxy-client"] },
      version: "0.1.0",
    });
    server = await startVirtApiServer(app, {
      certPem: serving.certPem,
      keyPem: serving.keyPem,
      clientCaPem: ca.certPem,
      host: "127.0.0.1",
      port: 0,
    });
    cluster.addVm(newVm("vm-cirros", { runStrategy: "Always" })).addVmi(newVmi("vm-cirros", "Running"));
    cluster.addVm(newVm("stopped", { runStrategy: "Halted" }));
  });

  afterAll(async () => {
    await server.close();
    for (const c of handlerWss.clients) c.terminate();
    handlerWss.close();
    handlerServer.closeAllConnections();
    await new Promise<void>((r) => handlerServer.close(() => r()));
  });

  it("serves discovery for subresources.kubevirt.io", async () => {
    const list = JSON.parse((await call(server.port, "GET", "/apis/subresources.kubevirt.io/v1")).body) as {
      kind: string;
      resources: Array<{ name: string }>;
    };
    expect(list.kind).toBe("APIResourceList");
    expect(list.resources.map((r) => r.name)).toContain("virtualmachines/start");
    const groups = JSON.parse((await call(server.port, "GET", "/apis")).body) as { groups: Array<{ name: string }> };
    expect(groups.groups[0]?.name).toBe("subresources.kubevirt.io");
  });

  it("answers version and healthz", async () => {
    expect(
      JSON.parse((await call(server.port, "GET", "/apis/subresources.kubevirt.io/v1/version")).body),
    ).toMatchObject({ gitVersion: "v0.1.0" });
    expect((await call(server.port, "GET", "/healthz")).code).toBe(200);
  });

  it("start of a running Always VM is a 409 Status with KubeVirt's message, as the proxied user", async () => {
    const answer = await call(
      server.port,
      "PUT",
      `${SUB}/virtualmachines/vm-cirros/start`,
      {},
      { "X-Remote-User": "alice", "X-Remote-Group": "devs" },
    );
    expect(answer.code).toBe(409);
    expect(JSON.parse(answer.body)).toMatchObject({
      kind: "Status",
      reason: "Conflict",
      message: 'Operation cannot be fulfilled on virtualmachine.kubevirt.io "vm-cirros": VM is already running',
    });
    expect(users.at(-1)).toEqual({ username: "alice", groups: ["devs"], extra: {} });
  });

  it("start of a Halted VM is 202 and writes the patch", async () => {
    const answer = await call(server.port, "PUT", `${SUB}/virtualmachines/stopped/start`, undefined, {
      "X-Remote-User": "alice",
    });
    expect(answer.code).toBe(202);
    expect(cluster.vms.get("default/stopped")?.spec.runStrategy).toBe("Always");
  });

  it("refuses identity headers without the proxy's client certificate (401)", async () => {
    const answer = await call(
      server.port,
      "PUT",
      `${SUB}/virtualmachines/stopped/stop`,
      {},
      { "X-Remote-User": "mallory" },
      false,
    );
    expect(answer.code).toBe(401);
  });

  it("a malformed body is 400 Can not unmarshal", async () => {
    const answer = await new Promise<Answer>((resolve, reject) => {
      const req = request(
        {
          host: "127.0.0.1",
          port: server.port,
          method: "PUT",
          path: `${SUB}/virtualmachines/stopped/stop`,
          ca: ca.certPem,
          cert: proxyClient.certPem,
          key: proxyClient.keyPem,
          headers: { "X-Remote-User": "a" },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("end", () => resolve({ code: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
        },
      );
      req.on("error", reject);
      req.end("{not json");
    });
    expect(answer.code).toBe(400);
    expect(answer.body).toContain("Can not unmarshal Request body to struct");
  });

  it("unknown paths are 404 Status and wrong methods 405", async () => {
    expect((await call(server.port, "GET", "/nope")).code).toBe(404);
    expect(
      (await call(server.port, "GET", `${SUB}/virtualmachines/x/start`, undefined, { "X-Remote-User": "a" })).code,
    ).toBe(405);
  });

  it("serves an AdmissionReview denial for an invalid VM", async () => {
    const review = {
      apiVersion: "admission.k8s.io/v1",
      kind: "AdmissionReview",
      request: {
        uid: "abc",
        kind: { group: "kubevirt.io", version: "v1", kind: "VirtualMachine" },
        resource: { group: "kubevirt.io", version: "v1", resource: "virtualmachines" },
        operation: "CREATE",
        namespace: "default",
        object: {
          spec: {
            runStrategy: "Often",
            template: { spec: { domain: { resources: { requests: { memory: "1Gi" } } } } },
          },
        },
      },
    };
    const answer = JSON.parse((await call(server.port, "POST", "/virtualmachines-validate", review)).body) as {
      response: Record<string, unknown>;
    };
    expect(answer.response).toMatchObject({
      uid: "abc",
      allowed: false,
      status: { code: 422, message: expect.stringContaining("Invalid RunStrategy (Often)") },
    });
  });

  it("proxies the console WebSocket to virt-handler with plain.kubevirt.io", async () => {
    const ws = new WebSocket(
      `wss://127.0.0.1:${server.port}${SUB}/virtualmachineinstances/vm-cirros/console`,
      [CONSOLE_SUBPROTOCOL],
      {
        ca: ca.certPem,
        cert: proxyClient.certPem,
        key: proxyClient.keyPem,
        headers: { "X-Remote-User": "alice" },
      },
    );
    const received: string[] = [];
    await new Promise<void>((resolve, reject) => {
      ws.on("message", (data: Buffer) => {
        received.push(data.toString());
        if (received.length === 1) ws.send(Buffer.from("root\n"));
        if (received.length === 2) resolve();
      });
      ws.on("error", reject);
    });
    expect(ws.protocol).toBe(CONSOLE_SUBPROTOCOL);
    expect(received).toEqual(["login: ", "ROOT\n"]);
    expect(handlerPaths.at(-1)).toBe("/v1/namespaces/default/virtualmachineinstances/vm-cirros/console");
    ws.close();
  });

  it("refuses the console of a VMI that is not running with 400", async () => {
    cluster.addVmi(newVmi("booting", "Scheduled"));
    const ws = new WebSocket(
      `wss://127.0.0.1:${server.port}${SUB}/virtualmachineinstances/booting/console`,
      [CONSOLE_SUBPROTOCOL],
      {
        ca: ca.certPem,
        cert: proxyClient.certPem,
        key: proxyClient.keyPem,
        headers: { "X-Remote-User": "alice" },
      },
    );
    const code = await new Promise<number>((resolve) => {
      ws.on("unexpected-response", (_req, res) => resolve(res.statusCode ?? 0));
      ws.on("error", () => resolve(-1));
    });
    expect(code).toBe(400);
  });

  // Last: it leaves this server draining.
  it("a draining server is not ready: /healthz answers 503 while it still serves requests", async () => {
    const drain = server.close({ delayMs: 500 });
    const health = await call(server.port, "GET", "/healthz");
    expect(health).toMatchObject({ code: 503, body: "shutting down" });
    expect((await call(server.port, "GET", "/apis/subresources.kubevirt.io/v1")).code).toBe(200);
    await drain;
  });
});
