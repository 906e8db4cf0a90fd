import { appendFileSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type CertificateAndKey, generateCa, issueCertificate } from "@kvt/certs";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { startLogServer, tailLines } from "./log-server.ts";

let dir = "";
let close: (() => Promise<void>) | undefined;
let ca: CertificateAndKey;
let serving: CertificateAndKey;
let apiserverClient: CertificateAndKey;
let otherCaClient: CertificateAndKey;
beforeAll(async () => {
  ca = await generateCa("kubelet-ca");
  serving = await issueCertificate(ca, { commonName: "system:node:node01", ipAddresses: ["127.0.0.1"] });
  apiserverClient = await issueCertificate(ca, { commonName: "kube-apiserver-kubelet-client", usage: "client" });
  otherCaClient = await issueCertificate(await generateCa("kubelet-ca"), { commonName: "x", usage: "client" });
});
afterEach(async () => {
  await close?.();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** GET over TLS as `client` (none: no certificate); resolves with status and the first bytes of the body. */
function get(url: string, client?: CertificateAndKey, follow = false): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      { ca: ca.certPem, ...(client ? { cert: client.certPem, key: client.keyPem } : {}) },
      (res) => {
        let body = "";
        res.on("data", (d: Buffer) => {
          body += d.toString();
          if (follow && body.includes("cloud-init")) {
            req.destroy();
            resolve({ status: res.statusCode ?? 0, body });
          }
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on("error", reject);
    req.end();
  });
}

describe("log server", () => {
  it("tailLines() returns the last N lines", () => {
    dir = mkdtempSync(join(tmpdir(), "kvt-log-"));
    const f = join(dir, "c.log");
    writeFileSync(f, "a\nb\nc\nd\n");
    expect(tailLines(f, 2).toString()).toBe("c\nd\n");
    expect(tailLines(f, 10).toString()).toBe("a\nb\nc\nd\n");
  });

  it("serves a container's log to the API server's client certificate, follows appends, 404s unknown ones", async () => {
    dir = mkdtempSync(join(tmpdir(), "kvt-log-"));
    const f = join(dir, "compute.log");
    writeFileSync(f, "boot\n");
    const server = await startLogServer(
      (ns, pod, c) => (ns === "default" && pod === "p" && (c ?? "compute") === "compute" ? f : undefined),
      { tls: { cert: serving.certPem, key: serving.keyPem, clientCa: ca.certPem } },
    );
    close = server.close;
    const base = `https://127.0.0.1:${server.port}/containerLogs/default/p`;
    expect(await get(`${base}/compute`, apiserverClient)).toEqual({ status: 200, body: "boot\n" });
    expect((await get(`${base}/other`, apiserverClient)).status).toBe(404);
    const following = get(`${base}/compute?follow=true`, apiserverClient, true);
    setTimeout(() => appendFileSync(f, "printed from cloud-init userdata\n"), 100);
    expect((await following).body).toBe("boot\nprinted from cloud-init userdata\n");
  });

  // Issue 23: the kubelets' log ports served container logs (the guest console stream) without credentials.
  it.each([
    ["no client certificate", undefined],
    ["a client certificate of another CA", "otherCa"],
    ["the CA's serving (not client) certificate", "serving"],
  ])("refuses %s", async (_what, which) => {
    dir = mkdtempSync(join(tmpdir(), "kvt-log-"));
    const f = join(dir, "compute.log");
    writeFileSync(f, "guest console bytes\n");
    const server = await startLogServer(() => f, {
      tls: { cert: serving.certPem, key: serving.keyPem, clientCa: ca.certPem },
    });
    close = server.close;
    const client = which === "otherCa" ? otherCaClient : which === "serving" ? serving : undefined;
    await expect(get(`https://127.0.0.1:${server.port}/containerLogs/default/p/compute`, client)).rejects.toThrow();
    const plain = await fetch(`http://127.0.0.1:${server.port}/containerLogs/default/p/compute`).then(
      async (r) => `status ${r.status}: ${await r.text()}`,
      () => "refused",
    );
    expect(plain).not.toContain("guest console bytes");
  });
});
