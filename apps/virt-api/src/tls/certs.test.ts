import { X509Certificate } from "node:crypto";
import { describe, expect, it } from "vitest";
import { generateCa, issueCertificate } from "./certs.ts";

describe("certificates", () => {
  it("generateCa() makes a self-signed CA certificate", () => {
    const ca = new X509Certificate(generateCa("test-ca").certPem);
    expect(ca.ca).toBe(true);
    expect(ca.subject).toBe("CN=test-ca");
    expect(ca.verify(ca.publicKey)).toBe(true);
  });

  it("issueCertificate() signs a serving cert with the requested names", () => {
    const caPair = generateCa();
    const leaf = new X509Certificate(
      issueCertificate(caPair, { dnsNames: ["virt-api.kubevirt.svc"], ipAddresses: ["127.0.0.1", "::1"] }).certPem,
    );
    const ca = new X509Certificate(caPair.certPem);
    expect(leaf.ca).toBe(false);
    expect(leaf.checkIssued(ca)).toBe(true);
    expect(leaf.verify(ca.publicKey)).toBe(true);
    expect(leaf.subjectAltName).toBe("DNS:virt-api.kubevirt.svc, IP Address:127.0.0.1, IP Address:0:0:0:0:0:0:0:1");
    expect(leaf.checkHost("virt-api.kubevirt.svc")).toBe("virt-api.kubevirt.svc");
    expect(leaf.checkIP("127.0.0.1")).toBe("127.0.0.1");
  });

  it("a certificate from another CA does not verify", () => {
    const other = new X509Certificate(generateCa().certPem);
    const leaf = new X509Certificate(issueCertificate(generateCa(), { dnsNames: ["a"] }).certPem);
    expect(leaf.verify(other.publicKey)).toBe(false);
  });
});
