import { X509Certificate } from "node:crypto";
import { createServer, request } from "node:https";
import type { AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import {
  CertificateError,
  certificateInfo,
  generateCa,
  isClientCertificate,
  isIssuedBy,
  issueCertificate,
  MIGRATION_CERTIFICATE_VALIDITY_MS,
  mintMigrationCertificate,
  needsRenewal,
} from "./certs.ts";
import { keyMatchesCertificate } from "./rotation.ts";

async function get(port: number, opts: { ca: string; cert?: string; key?: string }): Promise<number> {
  return await new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, path: "/", ...opts }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on("error", reject);
    req.end();
  });
}

describe("certificates", () => {
  it("generateCa() makes a CA that OpenSSL (node:crypto) parses, with CA:TRUE", async () => {
    const ca = await generateCa("test-ca");
    const x = new X509Certificate(ca.certPem);
    expect(x.ca).toBe(true);
    expect(x.subject).toBe("CN=test-ca");
    expect(x.verify(x.publicKey)).toBe(true);
  });

  it("issueCertificate() signs a leaf with SANs, subject O and the right purpose", async () => {
    const ca = await generateCa("test-ca");
    const leaf = await issueCertificate(ca, {
      commonName: "kubevirt.io:system:node:node01",
      organization: "kubevirt.io:system",
      dnsNames: ["virt-handler", "localhost"],
      ipAddresses: ["127.0.0.1", "::1"],
    });
    const x = new X509Certificate(leaf.certPem);
    expect(x.ca).toBe(false);
    expect(x.subject).toBe("O=kubevirt.io:system\nCN=kubevirt.io:system:node:node01");
    // Node prints ::1 uncompressed, Deno compressed.
    expect(x.subjectAltName).toMatch(
      /^DNS:virt-handler, DNS:localhost, IP Address:127\.0\.0\.1, IP Address:(0:0:0:0:0:0:0:1|::1)$/,
    );
    expect(x.checkIssued(new X509Certificate(ca.certPem))).toBe(true);
    expect(x.verify(new X509Certificate(ca.certPem).publicKey)).toBe(true);
    expect(certificateInfo(leaf.certPem).extendedKeyUsage).toEqual(["1.3.6.1.5.5.7.3.1"]);
    expect(isIssuedBy(leaf.certPem, ca.certPem)).toBe(true);
    expect(isIssuedBy(leaf.certPem, (await generateCa("test-ca")).certPem)).toBe(false);
    expect(isIssuedBy("junk", ca.certPem)).toBe(false);
    const client = await issueCertificate(ca, { commonName: "c", usage: "client" });
    expect(certificateInfo(client.certPem).extendedKeyUsage).toEqual(["1.3.6.1.5.5.7.3.2"]);
    expect(isClientCertificate(new X509Certificate(client.certPem).raw)).toBe(true);
    expect(isClientCertificate(x.raw)).toBe(false);
    expect(isClientCertificate(new Uint8Array([1, 2, 3]))).toBe(false);
  });

  it("serves mutual TLS: the client certificate of the CA passes, none or another CA's is refused", async () => {
    const ca = await generateCa("mtls-ca");
    const other = await generateCa("other-ca");
    const serving = await issueCertificate(ca, { ipAddresses: ["127.0.0.1"] });
    const client = await issueCertificate(ca, { commonName: "client", usage: "client" });
    const stranger = await issueCertificate(other, { commonName: "client", usage: "client" });
    const server = createServer(
      { cert: serving.certPem, key: serving.keyPem, ca: ca.certPem, requestCert: true, rejectUnauthorized: true },
      (_req, res) => res.end("ok"),
    );
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
    const { port } = server.address() as AddressInfo;
    try {
      expect(await get(port, { ca: ca.certPem, cert: client.certPem, key: client.keyPem })).toBe(200);
      await expect(get(port, { ca: ca.certPem })).rejects.toThrow();
      await expect(get(port, { ca: ca.certPem, cert: stranger.certPem, key: stranger.keyPem })).rejects.toThrow();
      await expect(get(port, { ca: other.certPem, cert: client.certPem, key: client.keyPem })).rejects.toThrow(
        /self-signed|unable to verify|signature/i,
      );
    } finally {
      server.close();
    }
  });

  it("mintMigrationCertificate() makes a fresh self-signed pair for both TLS roles, valid an hour from a minute ago", async () => {
    const now = new Date("2026-11-26T12:00:00Z");
    const a = await mintMigrationCertificate("kubevirt-migration-m1-source", MIGRATION_CERTIFICATE_VALIDITY_MS, now);
    const b = await mintMigrationCertificate("kubevirt-migration-m1-source", MIGRATION_CERTIFICATE_VALIDITY_MS, now);
    const cert = new X509Certificate(a.certPem);
    expect(cert.subject).toBe("CN=kubevirt-migration-m1-source");
    expect(cert.issuer).toBe(cert.subject);
    expect(cert.verify(cert.publicKey)).toBe(true); // self-signed
    expect(cert.ca).toBe(false);
    expect(new Date(cert.validFrom).getTime()).toBe(now.getTime() - 60_000);
    expect(new Date(cert.validTo).getTime()).toBe(now.getTime() + 3_600_000);
    expect(certificateInfo(a.certPem).extendedKeyUsage).toEqual(["1.3.6.1.5.5.7.3.1", "1.3.6.1.5.5.7.3.2"]);
    expect(keyMatchesCertificate(a.certPem, a.keyPem)).toBe(true);
    expect(b.keyPem).not.toBe(a.keyPem); // a fresh key every time
  });

  it("refuses a CA that is not PEM with a CertificateError", async () => {
    await expect(issueCertificate({ certPem: "junk", keyPem: "junk" }, {})).rejects.toBeInstanceOf(CertificateError);
  });

  it("needsRenewal() is true in the last fifth of the lifetime and for garbage", async () => {
    const ca = await generateCa("ca", 10);
    expect(needsRenewal(ca.certPem)).toBe(false);
    expect(needsRenewal(ca.certPem, new Date(Date.now() + 9 * 86_400_000))).toBe(true);
    expect(needsRenewal("garbage")).toBe(true);
  });
});
