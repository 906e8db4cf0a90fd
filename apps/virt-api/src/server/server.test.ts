import { X509Certificate } from "node:crypto";
import { Agent, request } from "node:https";
import { generateCa, issueCertificate } from "@kvt/certs";
import { afterEach, describe, expect, it } from "vitest";
import type { VirtApiApp } from "./app.ts";
import { type RunningServer, startVirtApiServer } from "./server.ts";

/** The serving certificate's serial and the status of GET /healthz, trusting `ca`. */
async function probe(port: number, ca: string): Promise<{ serial: string; status: number }> {
  return await new Promise((resolve, reject) => {
    const req = request(
      { host: "127.0.0.1", port, path: "/healthz", ca, servername: "virt-api.kubevirt.svc", agent: false },
      (res) => {
        const serial = new X509Certificate(
          (res.socket as unknown as { getPeerCertificate(): { raw: Buffer } }).getPeerCertificate().raw,
        ).serialNumber;
        res.resume();
        resolve({ serial, status: res.statusCode ?? 0 });
      },
    );
    req.on("error", reject);
    req.end();
  });
}

/** A server whose app answers every request with 200 `body` after `ms`. */
async function startSlow(ca: Awaited<ReturnType<typeof generateCa>>, body: string, ms: number): Promise<RunningServer> {
  const pair = await issueCertificate(ca, { dnsNames: ["virt-api.kubevirt.svc"] });
  const slow = {
    handle: (_req: unknown, res: { writeHead(c: number): { end(b: string): void } }) =>
      setTimeout(() => res.writeHead(200).end(body), ms),
    upgrade: () => undefined,
    close: () => undefined,
    drain: () => undefined,
  } as unknown as VirtApiApp;
  return startVirtApiServer(slow, { certPem: pair.certPem, keyPem: pair.keyPem, port: 0, host: "127.0.0.1" });
}

/** GET /x over `agent`: the status, the Connection header and the body. */
function getX(
  port: number,
  ca: string,
  agent: Agent | false,
): Promise<{ status: number; connection: string | undefined; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: "127.0.0.1", port, path: "/x", ca, servername: "virt-api.kubevirt.svc", agent },
      (res) => {
        let body = "";
        res.on("data", (c: Buffer) => {
          body += c.toString();
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, connection: res.headers.connection, body }));
      },
    );
    req.on("error", reject);
    req.end();
  });
}

const app = {
  handle: (_req: unknown, res: { writeHead(c: number): { end(): void } }) => res.writeHead(200).end(),
  upgrade: () => undefined,
  close: () => undefined,
  drain: () => undefined,
} as unknown as VirtApiApp;

describe("virt-api's HTTPS server", () => {
  let server: RunningServer | undefined;
  afterEach(async () => server?.close());

  it("serves a renewed certificate to new connections without a restart, and refuses a mismatched pair", async () => {
    const ca = await generateCa("kubevirt.io@1");
    const names = { dnsNames: ["virt-api.kubevirt.svc"] };
    const first = await issueCertificate(ca, names);
    server = await startVirtApiServer(app, {
      certPem: first.certPem,
      keyPem: first.keyPem,
      port: 0,
      host: "127.0.0.1",
    });
    const before = await probe(server.port, ca.certPem);
    expect(before.serial).toBe(new X509Certificate(first.certPem).serialNumber);
    const renewed = await issueCertificate(ca, names);
    server.updateCertificate(renewed.certPem, renewed.keyPem);
    const after = await probe(server.port, ca.certPem);
    expect(after).toEqual({ serial: new X509Certificate(renewed.certPem).serialNumber, status: 200 });
    expect(() => server?.updateCertificate(first.certPem, renewed.keyPem)).toThrow();
    expect((await probe(server.port, ca.certPem)).serial).toBe(after.serial);
  });

  it("drains on close: in-flight requests finish, responses say Connection: close, then the port is shut", async () => {
    const ca = await generateCa("kubevirt.io@1");
    server = await startSlow(ca, "done", 300);
    const agent = new Agent({ keepAlive: true, maxSockets: 4 });
    const get = () => getX(server!.port, ca.certPem, agent);
    expect(await get()).toMatchObject({ status: 200, connection: "keep-alive" });
    const inFlight = get();
    await new Promise((r) => setTimeout(r, 50));
    const closing = server.close({ delayMs: 600, graceMs: 5_000 });
    // Still answering while it leaves its Service, but no connection is kept for a later request.
    expect(await inFlight).toEqual({ status: 200, connection: "close", body: "done" });
    expect(await get()).toEqual({ status: 200, connection: "close", body: "done" });
    await closing;
    await expect(get()).rejects.toThrow(/ECONNREFUSED/);
    server = undefined;
    agent.destroy();
  });

  it("a request in flight when the listener closes finishes within the grace period", async () => {
    const ca = await generateCa("kubevirt.io@1");
    server = await startSlow(ca, "late", 400);
    const answer = getX(server.port, ca.certPem, false);
    await new Promise((r) => setTimeout(r, 100));
    await server.close({ delayMs: 0, graceMs: 5_000 });
    server = undefined;
    expect(await answer).toMatchObject({ status: 200, body: "late" });
  });
});
