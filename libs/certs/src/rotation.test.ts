import { describe, expect, it } from "vitest";
import { CertificateError, certificateInfo, generateCa, issueCertificate } from "./certs.ts";
import {
  keyMatchesCertificate,
  MAX_CERTIFICATES_IN_BUNDLE,
  mergeCaBundle,
  rotationDeadline,
  splitCertificates,
} from "./rotation.ts";

const HOUR = 3_600_000;
const T0 = new Date("2026-12-01T00:00:00Z");
const at = (hours: number): Date => new Date(T0.getTime() + hours * HOUR);

describe("issuing at a given time for a given duration", () => {
  it("generateCa() and issueCertificate() take a duration in ms and the issue time", async () => {
    const ca = await generateCa("kubevirt.io@1", { durationMs: 168 * HOUR, now: T0 });
    const leaf = await issueCertificate(ca, { commonName: "x", validityMs: 24 * HOUR, now: at(1) });
    expect(certificateInfo(ca.certPem).notAfter).toEqual(at(168));
    expect(certificateInfo(leaf.certPem).notAfter).toEqual(at(25));
    // Valid from a minute before the issue time (clock skew between issuer and verifier).
    expect(certificateInfo(leaf.certPem).notBefore).toEqual(new Date(at(1).getTime() - 60_000));
  });
});

describe("rotationDeadline()", () => {
  it("is notAfter - renewBefore for a leaf of the current CA", async () => {
    const ca = await generateCa("ca", { durationMs: 168 * HOUR, now: T0 });
    const leaf = await issueCertificate(ca, { validityMs: 24 * HOUR, now: T0 });
    const deadline = rotationDeadline({ certPem: leaf.certPem, caPem: ca.certPem, renewBeforeMs: 5 * HOUR, now: T0 });
    expect(deadline).toEqual(at(19));
  });

  it("is now for a leaf another CA signed, and for an unreadable certificate", async () => {
    const ca = await generateCa("ca", { durationMs: 168 * HOUR, now: T0 });
    const other = await generateCa("other", { durationMs: 168 * HOUR, now: T0 });
    const leaf = await issueCertificate(other, { validityMs: 24 * HOUR, now: T0 });
    const now = at(2);
    expect(rotationDeadline({ certPem: leaf.certPem, caPem: ca.certPem, renewBeforeMs: HOUR, now })).toBe(now);
    expect(rotationDeadline({ certPem: "garbage", caPem: ca.certPem, renewBeforeMs: HOUR, now })).toBe(now);
  });

  it("a leaf outliving its CA is renewed half way into the CA's overlap", async () => {
    const ca = await generateCa("ca", { durationMs: 10 * HOUR, now: T0 });
    const leaf = await issueCertificate(ca, { validityMs: 24 * HOUR, now: at(8) });
    const input = { certPem: leaf.certPem, caPem: ca.certPem, renewBeforeMs: 5 * HOUR, now: at(8) };
    expect(rotationDeadline({ ...input, caRenewBeforeMs: 2 * HOUR })).toEqual(at(9));
    expect(rotationDeadline(input)).toEqual(at(10));
  });

  it("for a CA itself, is notAfter - renewBefore", async () => {
    const ca = await generateCa("ca", { durationMs: 168 * HOUR, now: T0 });
    expect(rotationDeadline({ certPem: ca.certPem, renewBeforeMs: 33.6 * HOUR, now: T0 })).toEqual(at(134.4));
  });
});

describe("mergeCaBundle()", () => {
  it("puts the new CA first and keeps the old one for the overlap, then drops it", async () => {
    const old = await generateCa("old", { durationMs: 168 * HOUR, now: T0 });
    const next = await generateCa("new", { durationMs: 168 * HOUR, now: at(134) });
    const during = mergeCaBundle(next.certPem, old.certPem, 34 * HOUR, at(134));
    expect(during.count).toBe(2);
    expect(splitCertificates(during.bundle)).toEqual([`${next.certPem.trim()}\n`, `${old.certPem.trim()}\n`]);
    // Re-merging the merged bundle is stable during the overlap.
    expect(mergeCaBundle(next.certPem, during.bundle, 34 * HOUR, at(150))).toEqual(during);
    // After the overlap (the new CA has existed for longer than it), only the new CA is left.
    const after = mergeCaBundle(next.certPem, during.bundle, 34 * HOUR, at(169));
    expect(after).toEqual({ bundle: `${next.certPem.trim()}\n`, count: 1 });
  });

  it("drops expired CAs and never repeats the current one", async () => {
    const expired = await generateCa("expired", { durationMs: HOUR, now: T0 });
    const current = await generateCa("current", { durationMs: 168 * HOUR, now: at(2) });
    const merged = mergeCaBundle(current.certPem, current.certPem + expired.certPem, 34 * HOUR, at(3));
    expect(merged.count).toBe(1);
  });

  it("keeps at most the newest fifty of the existing bundle", async () => {
    const olds = await Promise.all(
      Array.from({ length: 55 }, (_, i) => generateCa(`ca-${i}`, { durationMs: 168 * HOUR, now: at(i / 60) })),
    );
    const current = await generateCa("current", { durationMs: 168 * HOUR, now: at(1) });
    const merged = mergeCaBundle(current.certPem, olds.map((c) => c.certPem).join(""), 34 * HOUR, at(1));
    expect(merged.count).toBe(MAX_CERTIFICATES_IN_BUNDLE + 1);
    // The five oldest went.
    expect(merged.bundle).not.toContain(olds[4]?.certPem.trim());
    expect(merged.bundle).toContain(olds[5]?.certPem.trim());
  });

  it("throws CertificateError on a bundle that is not PEM certificates", async () => {
    const ca = await generateCa("ca", { durationMs: HOUR, now: T0 });
    expect(() => mergeCaBundle(ca.certPem, "not a bundle", HOUR, T0)).toThrow(CertificateError);
    const broken = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
    expect(() => mergeCaBundle(ca.certPem, broken, HOUR, T0)).toThrow(CertificateError);
    expect(mergeCaBundle(ca.certPem, "", HOUR, T0).count).toBe(1);
  });
});

describe("keyMatchesCertificate()", () => {
  it("pairs a certificate with its own key only", async () => {
    const ca = await generateCa("ca", { durationMs: HOUR, now: T0 });
    const a = await issueCertificate(ca, { validityMs: HOUR });
    const b = await issueCertificate(ca, { validityMs: HOUR });
    expect(keyMatchesCertificate(a.certPem, a.keyPem)).toBe(true);
    expect(keyMatchesCertificate(a.certPem, b.keyPem)).toBe(false);
    expect(keyMatchesCertificate("junk", a.keyPem)).toBe(false);
    expect(keyMatchesCertificate(a.certPem, "junk")).toBe(false);
  });
});
