/**
 * The handler's server for virt-api refuses every peer but virt-api (issue 23, "Unauthenticated control of VMs":
 * anyone reaching the port paused VMIs and read their consoles). Real TLS on 127.0.0.1, fake launchers.
 */
import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";
import { PassThrough } from "node:stream";
import type { VirtualMachineInstance } from "@kvt/api";
import { type CertificateAndKey, generateCa, issueCertificate } from "@kvt/certs";
import type { LauncherClient } from "@kvt/launcher-rpc";
import { createLogger } from "@kvt/observability";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import type { LauncherView } from "../launchers/launcher-registry.ts";
import { CONSOLE_SUBPROTOCOL, HandlerServer, VIRT_API_CLIENT_NAME } from "./handler-server.ts";

const PATH = "/v1/namespaces/default/virtualmachineinstances/vm1";
let ca: CertificateAndKey;
let serving: CertificateAndKey;
let virtApi: CertificateAndKey;
let otherName: CertificateAndKey;
let otherCaClient: CertificateAndKey;
let server: HandlerServer;
let port: number;
const calls: string[] = [];

beforeAll(async () => {
  ca = await generateCa("kubevirt-ca");
  const otherCa = await generateCa("kubevirt-ca");
  serving = await issueCertificate(ca, {
    commonName: "kubevirt.io:system:node:virt-handler",
    ipAddresses: ["127.0.0.1"],
  });
  virtApi = await issueCertificate(ca, { commonName: VIRT_API_CLIENT_NAME, usage: "client" });
  otherName = await issueCertificate(ca, { commonName: "kubevirt.io:system:client:somebody", usage: "client" });
  otherCaClient = await issueCertificate(otherCa, { commonName: VIRT_API_CLIENT_NAME, usage: "client" });
  const client = {
    pause: () => {
      calls.push("pause");
      return Promise.resolve();
    },
    openConsole: () => {
      calls.push("console");
      const serial = new PassThrough();
      serial.write("guest bytes");
      return Promise.resolve(serial);
    },
  } as unknown as LauncherClient;
  const vmi = { metadata: { name: "vm1", namespace: "default", uid: "u1" } } as VirtualMachineInstance;
  server = new HandlerServer({
    findVmi: (ns, name) => (ns === "default" && name === "vm1" ? vmi : undefined),
    launcherFor: () => ({ socketPath: "", client, gone: false }) as unknown as LauncherView,
    logger: createLogger({ component: "test", level: "silent" }),
    tls: { cert: serving.certPem, key: serving.keyPem, ca: ca.certPem },
  });
  port = await server.listen(0, "127.0.0.1");
});

afterAll(async () => {
  await server.close();
});

/** PUT pause over TLS with `client` (or none); resolves with the status, rejects when the handshake is refused. */
function pause(client?: CertificateAndKey, trust = ca.certPem): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      {
        host: "127.0.0.1",
        port,
        path: `${PATH}/pause`,
        method: "PUT",
        ca: trust,
        ...(client ? { cert: client.certPem, key: client.keyPem } : {}),
      },
      (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      },
    );
    req.on("error", reject);
    req.end("{}");
  });
}

describe("HandlerServer", () => {
  it("pauses for virt-api's client certificate", async () => {
    calls.length = 0;
    expect(await pause(virtApi)).toBe(200);
    expect(calls).toEqual(["pause"]);
  });

  it("refuses plain HTTP: no pause happens", async () => {
    calls.length = 0;
    const outcome = await new Promise<string>((resolve) => {
      const req = httpRequest({ host: "127.0.0.1", port, path: `${PATH}/pause`, method: "PUT" }, (res) => {
        res.resume();
        resolve(`status ${res.statusCode}`);
      });
      req.on("error", (e) => resolve(`error ${e.message}`));
      req.end("{}");
    });
    expect(outcome).not.toMatch(/^status 2/);
    expect(calls).toEqual([]);
  });

  it.each([
    ["no client certificate", undefined],
    ["a certificate from another CA", "otherCa"],
    ["a certificate of the KubeVirt CA issued to another name", "otherName"],
  ])("refuses TLS with %s: no pause happens", async (_what, which) => {
    calls.length = 0;
    const client = which === "otherCa" ? otherCaClient : which === "otherName" ? otherName : undefined;
    await expect(pause(client)).rejects.toThrow();
    expect(calls).toEqual([]);
  });

  it("refuses the console WebSocket without a client certificate; serves guest bytes to virt-api", async () => {
    calls.length = 0;
    const refused = new WebSocket(`wss://127.0.0.1:${port}${PATH}/console`, [CONSOLE_SUBPROTOCOL], { ca: ca.certPem });
    await expect(
      new Promise((resolve, reject) => {
        refused.on("open", () => resolve("open"));
        refused.on("error", reject);
      }),
    ).rejects.toThrow();
    expect(calls).toEqual([]);
    const ws = new WebSocket(`wss://127.0.0.1:${port}${PATH}/console`, [CONSOLE_SUBPROTOCOL], {
      ca: ca.certPem,
      cert: virtApi.certPem,
      key: virtApi.keyPem,
    });
    const first = await new Promise<string>((resolve, reject) => {
      ws.on("message", (d: Buffer) => resolve(d.toString()));
      ws.on("error", reject);
    });
    ws.close();
    expect(first).toBe("guest bytes");
    expect(calls).toEqual(["console"]);
  });
});

describe("HandlerServer.updateTls()", () => {
  it("serves a rotated certificate and trusts only the new CA's clients", async () => {
    const newCa = await generateCa("kubevirt-ca");
    const newServing = await issueCertificate(newCa, { ipAddresses: ["127.0.0.1"] });
    const newClient = await issueCertificate(newCa, { commonName: VIRT_API_CLIENT_NAME, usage: "client" });
    const rotating = new HandlerServer({
      findVmi: () => undefined,
      launcherFor: () => undefined,
      logger: createLogger({ component: "test", level: "silent" }),
      tls: { cert: serving.certPem, key: serving.keyPem, ca: ca.certPem },
    });
    const rotatingPort = await rotating.listen(0, "127.0.0.1");
    const healthz = (client: CertificateAndKey, trust: string): Promise<number | string> =>
      new Promise((resolve) => {
        const req = httpsRequest(
          {
            host: "127.0.0.1",
            port: rotatingPort,
            path: "/healthz",
            ca: trust,
            cert: client.certPem,
            key: client.keyPem,
            agent: false, // a new handshake each time, as after a rotation
          },
          (res) => {
            res.resume();
            resolve(res.statusCode ?? 0);
          },
        );
        req.on("error", (e) => resolve(e.message));
        req.end();
      });
    try {
      expect(await healthz(virtApi, ca.certPem)).toBe(200);
      rotating.updateTls({ cert: newServing.certPem, key: newServing.keyPem, ca: newCa.certPem });
      expect(await healthz(newClient, newCa.certPem)).toBe(200);
      expect(typeof (await healthz(virtApi, ca.certPem))).toBe("string");
    } finally {
      await rotating.close();
    }
  });
});
