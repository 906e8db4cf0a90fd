import { X509Certificate } from "node:crypto";
import { request } from "node:https";
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

const app = {
  handle: (_req: unknown, res: { writeHead(c: number): { end(): void } }) => res.writeHead(200).end(),
  upgrade: () => undefined,
  close: () => undefined,
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
});
