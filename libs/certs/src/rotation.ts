/**
 * When to replace a certificate and which CAs a trust bundle keeps, as KubeVirt's virt-operator decides them
 * (pkg/virt-operator/resource/generate/components/secrets.go: NextRotationDeadline, MergeCABundle):
 *
 *   time ──────────────────────────────────────────────────────────────────────────────────────────>
 *   CA1 |====================================================|                   (CA duration)
 *   CA2                                  |=====================================================|
 *                                        ^ CA1 notAfter - ca renewBefore: CA2 is made
 *   bundle: [CA1]                        [CA2, CA1] ......................... [CA2]
 *                                        |<-- overlap = ca renewBefore -->|
 *   leaf  |==========|  |==========|  |==| |==========|                      (server duration)
 *                   ^ notAfter - renewBefore          a leaf no longer signed by the current CA: now
 *
 * A leaf that would outlive its CA is renewed half way through the CA's overlap, so peers already trust the new
 * CA when it is presented.
 */
import { createPrivateKey, X509Certificate as NodeX509Certificate } from "node:crypto";
import { CertificateError, certificateInfo, isIssuedBy } from "./certs.ts";

const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[A-Za-z0-9+/=\s]+?-----END CERTIFICATE-----/g;

/** KubeVirt keeps at most this many CAs in a bundle (the newest). */
export const MAX_CERTIFICATES_IN_BUNDLE = 50;

/**
 * The certificates of a PEM bundle, each as its own PEM block (with a trailing newline). Throws
 * {@link CertificateError} when the bundle holds text other than certificates, or a block that is not one.
 */
export function splitCertificates(bundle: string): string[] {
  const blocks = bundle.match(PEM_CERTIFICATE) ?? [];
  const rest = bundle.replace(PEM_CERTIFICATE, "").trim();
  if (rest !== "") throw new CertificateError("The CA bundle holds data that is not a PEM certificate");
  if (blocks.length === 0 && bundle.trim() !== "") {
    throw new CertificateError("The CA bundle holds no PEM certificate");
  }
  return blocks.map((b) => {
    certificateInfo(b);
    return `${b}\n`;
  });
}

/** Whether `keyPem` is the private key of `certPem` (false for unreadable input, as tls.X509KeyPair fails). */
export function keyMatchesCertificate(certPem: string, keyPem: string): boolean {
  try {
    return new NodeX509Certificate(certPem).checkPrivateKey(createPrivateKey(keyPem));
  } catch {
    // An unreadable certificate or key cannot serve: the caller replaces the pair.
    return false;
  }
}

/** What {@link rotationDeadline} weighs. */
export interface RotationInput {
  /** The certificate in use. */
  readonly certPem: string;
  /** The CA that should have signed it (absent for a CA itself). */
  readonly caPem?: string;
  /** Renew this long before the certificate expires (KubeVirt's `renewBefore`). */
  readonly renewBeforeMs: number;
  /** The CA's renewBefore: a leaf outliving its CA is renewed half way into the CA's overlap. */
  readonly caRenewBeforeMs?: number;
  readonly now: Date;
}

/**
 * When the certificate should be replaced (KubeVirt's NextRotationDeadline): `now` when it is unreadable or not
 * signed by `caPem`; else its notAfter minus renewBefore, or, when the CA expires first, the CA's notAfter minus half
 * of the CA's renewBefore (the CA's notAfter itself without one).
 */
export function rotationDeadline(input: RotationInput): Date {
  let notAfter: Date;
  try {
    notAfter = certificateInfo(input.certPem).notAfter;
  } catch {
    // Unreadable: replace it now.
    return input.now;
  }
  if (input.caPem !== undefined && !isIssuedBy(input.certPem, input.caPem)) return input.now;
  let deadline = notAfter.getTime() - input.renewBeforeMs;
  if (input.caPem !== undefined) {
    const caNotAfter = certificateInfo(input.caPem).notAfter.getTime();
    if (caNotAfter < notAfter.getTime()) {
      deadline = caNotAfter - (input.caRenewBeforeMs ?? 0) * 0.5;
    }
  }
  return new Date(deadline);
}

/** A merged bundle and how many CAs it holds. */
export interface MergedBundle {
  readonly bundle: string;
  readonly count: number;
}

/**
 * The trust bundle after a CA change (KubeVirt's MergeCABundle): the current CA first, then the CAs of `existing`
 * that are still valid, newest first, as long as the one before each (the current CA for the first) has existed
 * for less than `overlapMs`; at most {@link MAX_CERTIFICATES_IN_BUNDLE}. So the old CA stays trusted for the overlap
 * after a new one is made, while certificates it signed are still in use, and is dropped after. Throws
 * {@link CertificateError} when `existing` cannot be read (the caller then writes the current CA alone).
 */
export function mergeCaBundle(currentCaPem: string, existing: string, overlapMs: number, now: Date): MergedBundle {
  const current = splitCertificates(currentCaPem)[0];
  if (!current) throw new CertificateError("No current CA certificate to put in the bundle");
  const currentNotBefore = certificateInfo(current).notBefore.getTime();
  const valid = splitCertificates(existing)
    .map((pem) => ({ pem, info: certificateInfo(pem) }))
    .filter((c) => c.info.notAfter.getTime() >= now.getTime())
    .sort((a, b) => b.info.notBefore.getTime() - a.info.notBefore.getTime())
    .slice(0, MAX_CERTIFICATES_IN_BUNDLE);
  const kept: string[] = [];
  for (const [i, c] of valid.entries()) {
    const newer = i === 0 ? currentNotBefore : (valid[i - 1]?.info.notBefore.getTime() ?? 0);
    if (newer + overlapMs < now.getTime()) break;
    if (c.pem === current) continue;
    kept.push(c.pem);
  }
  return { bundle: [current, ...kept].join(""), count: kept.length + 1 };
}
