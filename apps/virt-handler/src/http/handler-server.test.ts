/**
 * The handler's server for virt-api refuses every peer but virt-api (issue 23, "Unauthenticated control of VMs":
 * anyone reaching the port paused VMIs and read their consoles). Real TLS on 127.0.0.1, fake launchers.
 */
import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";
import { Duplex, PassThrough } from "node:stream";
import type { VirtualMachineInstance } from "@kvt/api";
import { type CertificateAndKey, generateCa, issueCertificate } from "@kvt/certs";
import { type LauncherClient, LauncherRpcError } from "@kvt/launcher-rpc";
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
    openPortForward: (guestPort: number) => {
      calls.push(`portforward ${guestPort}`);
      if (guestPort === 23) {
        return Promise.reject(new LauncherRpcError("Unavailable", "dial tcp 10.0.2.2:23: connect: connection refused"));
      }
      return Promise.resolve(upperCaseGuest());
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

/** A guest connection that answers each write upper-cased and ends when its input ends. */
function upperCaseGuest(): Duplex {
  const guest: Duplex = new Duplex({
    read() {},
    write(chunk: Buffer, _enc, done) {
      guest.push(chunk.toString().toUpperCase());
      done();
    },
    final(done) {
      guest.push(null);
      done();
    },
  });
  guestStreams.push(guest);
  return guest;
}
const guestStreams: Duplex[] = [];

/** Opens a WebSocket to `path` as virt-api; resolves with it once open, or with the refusal's status and body. */
function openAsVirtApi(path: string): Promise<WebSocket | { status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`wss://127.0.0.1:${port}${path}`, [CONSOLE_SUBPROTOCOL], {
      ca: ca.certPem,
      cert: virtApi.certPem,
      key: virtApi.keyPem,
    });
    ws.on("open", () => resolve(ws));
    ws.on("unexpected-response", (_req, res) => {
      let body = "";
      res.on("data", (d: Buffer) => {
        body += d.toString();
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    ws.on("error", reject);
  });
}

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

describe("HandlerServer port-forward", () => {
  it("carries bytes to the launcher's guest connection and back; closing the socket closes it", async () => {
    calls.length = 0;
    const ws = await openAsVirtApi(`${PATH}/portforward/22`);
    if (!(ws instanceof WebSocket)) throw new Error(`refused: ${ws.status} ${ws.body}`);
    const reply = new Promise<string>((resolve) => ws.once("message", (d: Buffer) => resolve(d.toString())));
    ws.send(Buffer.from("ssh-2.0-client"));
    expect(await reply).toBe("SSH-2.0-CLIENT");
    expect(calls).toEqual(["portforward 22"]);
    ws.close();
    await expect.poll(() => guestStreams.at(-1)?.destroyed).toBe(true);
  });

  it("the guest ending its side closes the WebSocket", async () => {
    const ws = await openAsVirtApi(`${PATH}/portforward/8080/tcp`);
    if (!(ws instanceof WebSocket)) throw new Error("refused");
    const closed = new Promise<number>((resolve) => ws.once("close", resolve));
    guestStreams.at(-1)?.push(null);
    expect(await closed).not.toBe(1006); // a clean close (ws sends no code: 1005), not an abnormal one
  });

  it("a dial the launcher refuses is a Status with its message, before any upgrade", async () => {
    const answer = await openAsVirtApi(`${PATH}/portforward/23/tcp`);
    expect(answer).toMatchObject({ status: 503 });
    expect(JSON.parse((answer as { body: string }).body)).toMatchObject({
      kind: "Status",
      code: 503,
      reason: "ServiceUnavailable",
      message: "dial tcp 10.0.2.2:23: connect: connection refused",
    });
  });

  it.each([
    [`${PATH}/portforward/0`, 400, 'invalid port "0"'],
    [`${PATH}/portforward/70000/tcp`, 400, 'invalid port "70000"'],
    [`${PATH}/portforward/abc`, 400, 'invalid port "abc"'],
    [`${PATH}/portforward/22/sctp`, 400, 'unsupported protocol "sctp"'],
    ["/v1/namespaces/default/virtualmachineinstances/nope/portforward/22", 404, "not on this node"],
    ["/v1/namespaces/%E0%A4%A/virtualmachineinstances/vm1/portforward/22", 404, "no such path segment"],
  ])("%s is refused with %i (%s)", async (path, status, message) => {
    const answer = await openAsVirtApi(path);
    expect(answer).toMatchObject({ status });
    const body = JSON.parse((answer as { body: string }).body) as { kind: string; message: string };
    expect(body.kind).toBe("Status");
    expect(body.message).toContain(message);
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
      // A certificate read with the other one's key (a swap caught half way) is refused; the current pair stays.
      expect(() => rotating.updateTls({ cert: newServing.certPem, key: serving.keyPem, ca: newCa.certPem })).toThrow(
        "not the private key",
      );
      expect(await healthz(newClient, newCa.certPem)).toBe(200);
    } finally {
      await rotating.close();
    }
  });
});
