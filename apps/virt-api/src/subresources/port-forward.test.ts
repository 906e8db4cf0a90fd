/**
 * The portforward subresource through virt-api's real server: a VMI's and a VM's tunnel to a real WebSocket
 * "virt-handler" over TLS, and every refusal a Status on the upgrade request (KubeVirt's messages).
 */
import { createServer as createHttpsServer, request } from "node:https";
import type { AddressInfo } from "node:net";
import type { VirtualMachineInstance } from "@kvt/api";
import { generateCa, issueCertificate } from "@kvt/certs";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket, { WebSocketServer } from "ws";
import { FakeCluster, newVm, newVmi } from "../fake/fake-cluster.ts";
import { CONSOLE_SUBPROTOCOL, HttpHandlerClient, TemplateHandlerLocator } from "../handler/handler-client.ts";
import { VirtApiApp } from "../server/app.ts";
import { type RunningServer, startVirtApiServer } from "../server/server.ts";
import { parsePortForwardTarget } from "./port-forward.ts";

const ca = await generateCa();
const serving = await issueCertificate(ca, { dnsNames: ["localhost"], ipAddresses: ["127.0.0.1"] });
const SUB = "/apis/subresources.kubevirt.io/v1/namespaces/default";

/** A running VMI with the masquerade interface status KubeVirt reports, owned by VM `owner` when given. */
function runningVmi(name: string, owner?: string): VirtualMachineInstance {
  const vmi = newVmi(name, "Running");
  vmi.status = { ...vmi.status, interfaces: [{ name: "default", ipAddress: "10.64.1.5", infoSource: "domain" }] };
  if (owner) {
    vmi.metadata = {
      ...vmi.metadata,
      ownerReferences: [{ apiVersion: "kubevirt.io/v1", kind: "VirtualMachine", name: owner, uid: `uid-vm-${owner}` }],
    };
  }
  return vmi;
}

type Outcome = { ws: WebSocket } | { status: number; body: Record<string, unknown> };

function open(path: string): Promise<Outcome> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`wss://127.0.0.1:${server.port}${SUB}${path}`, [CONSOLE_SUBPROTOCOL], { ca: ca.certPem });
    ws.on("open", () => resolve({ ws }));
    ws.on("unexpected-response", (_req, res) => {
      let text = "";
      res.on("data", (d: Buffer) => {
        text += d.toString();
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) as Record<string, unknown> }));
    });
    ws.on("error", reject);
  });
}

const cluster = new FakeCluster();
const handlerPaths: string[] = [];
const tunnels: string[] = [];
let server: RunningServer;
let handlerServer: ReturnType<typeof createHttpsServer>;
let handlerWss: WebSocketServer;

beforeAll(async () => {
  // A "virt-handler": port 23 is closed in the guest (a Status, as the handler answers a launcher's dial error);
  // any other port echoes upper-cased.
  handlerServer = createHttpsServer({ cert: serving.certPem, key: serving.keyPem });
  handlerWss = new WebSocketServer({
    noServer: true,
    handleProtocols: (p) => (p.has(CONSOLE_SUBPROTOCOL) ? CONSOLE_SUBPROTOCOL : false),
  });
  handlerServer.on("upgrade", (req, socket, head) => {
    handlerPaths.push(req.url ?? "");
    if (req.url?.endsWith("/portforward/23/tcp")) {
      const body = JSON.stringify({
        kind: "Status",
        code: 503,
        message: "dial tcp 10.0.2.2:23: connect: connection refused",
      });
      socket.end(`HTTP/1.1 503 ServiceUnavailable\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
      return;
    }
    handlerWss.handleUpgrade(req, socket, head, (ws) => {
      ws.on("message", (data: Buffer) => ws.send(Buffer.from(data.toString().toUpperCase())));
    });
  });
  await new Promise<void>((r) => handlerServer.listen(0, "127.0.0.1", () => r()));
  const handlerPort = (handlerServer.address() as AddressInfo).port;
  const app = new VirtApiApp({
    logger: pino({ level: "silent" }),
    clientFor: () => cluster,
    handler: new HttpHandlerClient(new TemplateHandlerLocator(`https://localhost:${handlerPort}`), { ca: ca.certPem }),
    webhooks: {},
    version: "0.1.0",
    portForwardTunnels: {
      opened: (_ns, name) => tunnels.push(`+${name}`),
      closed: (_ns, name) => tunnels.push(`-${name}`),
    },
  });
  server = await startVirtApiServer(app, {
    certPem: serving.certPem,
    keyPem: serving.keyPem,
    host: "127.0.0.1",
    port: 0,
  });
  cluster
    .addVmi(runningVmi("vmi1"))
    .addVm(newVm("vm1", { runStrategy: "Always" }, { created: true }))
    .addVmi(runningVmi("vm1", "vm1"))
    .addVm(newVm("stopped", { runStrategy: "Halted" }))
    .addVm(newVm("foreign", { runStrategy: "Always" }, { created: true }))
    .addVmi(runningVmi("foreign"))
    .addVmi(newVmi("paused", "Running", [{ type: "Paused", status: "True" }]))
    .addVmi(newVmi("no-nic", "Running"));
});

afterAll(async () => {
  await server.close();
  for (const c of handlerWss.clients) c.terminate();
  handlerWss.close();
  handlerServer.closeAllConnections();
  await new Promise<void>((r) => handlerServer.close(() => r()));
});

describe("portforward subresource", () => {
  it.each([
    ["a VMI", "/virtualmachineinstances/vmi1/portforward/22", "vmi1/portforward/22/tcp"],
    ["a VM (its VMI)", "/virtualmachines/vm1/portforward/8080/tcp", "vm1/portforward/8080/tcp"],
  ])("tunnels %s's port to its handler, bytes both ways", async (_what, path, handlerPath) => {
    const outcome = await open(path);
    if (!("ws" in outcome)) throw new Error(`refused: ${JSON.stringify(outcome.body)}`);
    const { ws } = outcome;
    expect(ws.protocol).toBe(CONSOLE_SUBPROTOCOL);
    const reply = new Promise<string>((resolve) => ws.once("message", (d: Buffer) => resolve(d.toString())));
    ws.send(Buffer.from("ssh-2.0"));
    expect(await reply).toBe("SSH-2.0");
    expect(handlerPaths.at(-1)).toBe(`/v1/namespaces/default/virtualmachineinstances/${handlerPath}`);
    const name = handlerPath.split("/")[0];
    expect(tunnels.at(-1)).toBe(`+${name}`);
    ws.close();
    await expect.poll(() => tunnels.at(-1)).toBe(`-${name}`);
  });

  it("a handler closing the tunnel closes the caller's WebSocket", async () => {
    const outcome = await open("/virtualmachineinstances/vmi1/portforward/80");
    if (!("ws" in outcome)) throw new Error("refused");
    const closed = new Promise<void>((resolve) => outcome.ws.once("close", () => resolve()));
    for (const c of handlerWss.clients) c.close();
    await closed;
  });

  it.each([
    ["/virtualmachineinstances/missing/portforward/22", 404, 'virtualmachineinstance.kubevirt.io "missing" not found'],
    ["/virtualmachines/missing/portforward/22", 404, 'virtualmachine.kubevirt.io "missing" not found'],
    [
      "/virtualmachines/stopped/portforward/22",
      409,
      'Operation cannot be fulfilled on virtualmachine.kubevirt.io "stopped": VMI is not started',
    ],
    [
      "/virtualmachineinstances/paused/portforward/22",
      409,
      'Operation cannot be fulfilled on virtualmachineinstance.kubevirt.io "paused": VMI is paused',
    ],
    ["/virtualmachineinstances/no-nic/portforward/22", 400, "no network interfaces are present"],
    [
      "/virtualmachineinstances/vmi1/portforward/23",
      500,
      "Internal error occurred: dialing VM: dial tcp 10.0.2.2:23: connect: connection refused",
    ],
    ["/virtualmachines/foreign/portforward/22", 500, "it is not owned by the VM"],
    ["/virtualmachineinstances/vmi1/portforward/0", 400, 'invalid port "0": expected 1-65535'],
    ["/virtualmachineinstances/vmi1/portforward/22x", 400, 'invalid port "22x"'],
    ["/virtualmachineinstances/vmi1/portforward/22/icmp", 400, 'unsupported protocol "icmp"'],
    ["/virtualmachineinstances/vmi1/portforward/22/tcp/extra", 404, "could not find the requested resource"],
  ])("%s is refused with a Status %i", async (path, code, message) => {
    const outcome = await open(path);
    expect(outcome).toMatchObject({ status: code, body: { kind: "Status", code } });
    expect((outcome as unknown as { body: { message: string } }).body.message).toContain(message);
  });

  it("a plain GET (no upgrade) is a 400 Status", async () => {
    const answer = await new Promise<{ code: number; body: string }>((resolve, reject) => {
      const req = request(
        {
          host: "127.0.0.1",
          port: server.port,
          path: `${SUB}/virtualmachineinstances/vmi1/portforward/22`,
          ca: ca.certPem,
        },
        (res) => {
          let body = "";
          res.on("data", (d: Buffer) => {
            body += d.toString();
          });
          res.on("end", () => resolve({ code: res.statusCode ?? 0, body }));
        },
      );
      req.on("error", reject);
      req.end();
    });
    expect(answer.code).toBe(400);
    expect(JSON.parse(answer.body)).toMatchObject({
      kind: "Status",
      message: "portforward requires a WebSocket upgrade",
    });
  });
});

describe("parsePortForwardTarget()", () => {
  it.each([
    ["22", undefined, { port: 22, protocol: "tcp" }],
    ["65535", "tcp", { port: 65535, protocol: "tcp" }],
  ])("port %s protocol %s", (port, protocol, expected) => {
    expect(parsePortForwardTarget(port, protocol)).toEqual(expected);
  });
});
