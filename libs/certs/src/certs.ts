/**
 * The one certificate module: certificate authorities and the serving and client certificates they issue, for
 * every TLS link of the platform (the API server, virt-api, virt-handler, the process-kubelets, the front proxy).
 * Certificates are built by @peculiar/x509 (a maintained X.509 library on WebCrypto, so the same code runs on
 * Node and Deno; docs/decisions/0010-certificates-on-peculiar-x509.md); keys are ECDSA P-256, signatures
 * ecdsa-with-SHA256, everything PEM (certificates `CERTIFICATE`, keys PKCS#8 `PRIVATE KEY`).
 *
 *   generateCa("kubevirt-ca") --> CA {certPem, keyPem}                    (CA:TRUE, keyCertSign, cRLSign)
 *        |
 *        +--> issueCertificate(ca, {dnsNames, ipAddresses, usage: "server"})   serverAuth, SANs
 *        +--> issueCertificate(ca, {commonName: "kubevirt.io:system:client:virt-handler", usage: "client"})
 */
import { X509Certificate as NodeX509Certificate, type webcrypto } from "node:crypto";
import { createRequire } from "node:module";
import type * as X509 from "@peculiar/x509";

const requireHere = createRequire(import.meta.url);
let x509Module: typeof X509 | undefined;

/**
 * @peculiar/x509, loaded at first use: it and its dependencies hold about 16-20 MiB of a process's memory, and most
 * processes importing this module only reload or compare PEM files (tls-material.ts, cert-files.ts). Its algorithms
 * resolve through tsyringe, which needs the Reflect metadata polyfill loaded first.
 */
function x509(): typeof X509 {
  if (x509Module === undefined) {
    requireHere("reflect-metadata");
    x509Module = requireHere("@peculiar/x509") as typeof X509;
  }
  return x509Module;
}

/** A certificate and its private key, PEM-encoded. */
export interface CertificateAndKey {
  /** `-----BEGIN CERTIFICATE-----` PEM. */
  readonly certPem: string;
  /** PKCS#8 `-----BEGIN PRIVATE KEY-----` PEM. */
  readonly keyPem: string;
}

/** What to put into an issued certificate. */
export interface CertificateRequest {
  /** Subject CN; default: the first DNS name, else `kubevirt`. */
  readonly commonName?: string;
  /** Subject O (for client certificates Kubernetes reads it as the user's group). */
  readonly organization?: string;
  /** subjectAltName DNS entries, e.g. `virt-api.kubevirt.svc`, `localhost`. */
  readonly dnsNames?: readonly string[];
  /** subjectAltName IP entries, e.g. `127.0.0.1`. */
  readonly ipAddresses?: readonly string[];
  /** `server` (serverAuth), `client` (clientAuth) or `both`; default `server`. */
  readonly usage?: "server" | "client" | "both";
  /** Validity in days from now; default 365. */
  readonly validityDays?: number;
  /** Validity in milliseconds from now (KubeVirt's `server.duration`); wins over `validityDays`. */
  readonly validityMs?: number;
  /** The issue time (default the clock's now); tests pass a fake clock's. */
  readonly now?: Date;
}

/** How long a CA is valid, from when (default the clock's now). */
export interface Validity {
  readonly durationMs: number;
  readonly now?: Date;
}

/** A certificate or key that cannot be used (malformed PEM, wrong key type, ...). */
export class CertificateError extends Error {
  override readonly name = "CertificateError";
}

const EC_KEY: webcrypto.EcKeyGenParams = { name: "ECDSA", namedCurve: "P-256" };
const SIGNING: webcrypto.EcdsaParams = { name: "ECDSA", hash: "SHA-256" };
const DAY_MS = 86_400_000;
/** Allowed clock skew between the issuer and a verifier: certificates are valid from a minute ago. */
const BACKDATE_MS = 60_000;

async function newKeyPair(): Promise<webcrypto.CryptoKeyPair> {
  return await globalThis.crypto.subtle.generateKey(EC_KEY, true, ["sign", "verify"]);
}

async function keyPem(key: webcrypto.CryptoKey): Promise<string> {
  const lib = x509();
  return lib.PemConverter.encode(await globalThis.crypto.subtle.exportKey("pkcs8", key), "PRIVATE KEY");
}

async function importSigningKey(pem: string): Promise<webcrypto.CryptoKey> {
  const lib = x509();
  try {
    const der = lib.PemConverter.decodeFirst(pem);
    return await globalThis.crypto.subtle.importKey("pkcs8", der, EC_KEY, false, ["sign"]);
  } catch (error) {
    throw new CertificateError("Cannot read the CA key: not a PKCS#8 ECDSA P-256 PEM key", { cause: error });
  }
}

function distinguishedName(commonName: string, organization?: string): string {
  const quote = (v: string): string => v.replace(/[\\,+"<>;=]/g, (c) => `\\${c}`);
  return [...(organization ? [`O=${quote(organization)}`] : []), `CN=${quote(commonName)}`].join(", ");
}

function validityWindow(durationMs: number, at = new Date()): { notBefore: Date; notAfter: Date } {
  const now = at.getTime();
  return { notBefore: new Date(now - BACKDATE_MS), notAfter: new Date(now + durationMs) };
}

/**
 * Generates a self-signed CA (basicConstraints CA:TRUE, keyCertSign, cRLSign), valid `validity`: a number of days
 * (default 3650), or a duration in milliseconds from a given time.
 */
export async function generateCa(
  commonName = "kubevirt-ca",
  validity: number | Validity = 3650,
): Promise<CertificateAndKey> {
  const lib = x509();
  const keys = await newKeyPair();
  const { durationMs, now } =
    typeof validity === "number" ? { durationMs: validity * DAY_MS, now: undefined } : validity;
  const cert = await lib.X509CertificateGenerator.createSelfSigned({
    name: distinguishedName(commonName),
    keys,
    signingAlgorithm: SIGNING,
    ...validityWindow(durationMs, now),
    extensions: [
      new lib.BasicConstraintsExtension(true, undefined, true),
      new lib.KeyUsagesExtension(
        lib.KeyUsageFlags.digitalSignature | lib.KeyUsageFlags.keyCertSign | lib.KeyUsageFlags.cRLSign,
        true,
      ),
      await lib.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return { certPem: cert.toString("pem"), keyPem: await keyPem(keys.privateKey) };
}

/** Issues a leaf certificate signed by `ca` for the names in `request`. Rejects with {@link CertificateError}. */
export async function issueCertificate(ca: CertificateAndKey, request: CertificateRequest): Promise<CertificateAndKey> {
  const lib = x509();
  let caCert: X509.X509Certificate;
  try {
    caCert = new lib.X509Certificate(ca.certPem);
  } catch (error) {
    throw new CertificateError("Cannot read the CA certificate: not an X.509 PEM certificate", { cause: error });
  }
  const signingKey = await importSigningKey(ca.keyPem);
  const keys = await newKeyPair();
  const usage = request.usage ?? "server";
  const purposes = [
    ...(usage !== "client" ? [lib.ExtendedKeyUsage.serverAuth] : []),
    ...(usage !== "server" ? [lib.ExtendedKeyUsage.clientAuth] : []),
  ];
  const names = [
    ...(request.dnsNames ?? []).map((value) => ({ type: "dns" as const, value })),
    ...(request.ipAddresses ?? []).map((value) => ({ type: "ip" as const, value })),
  ];
  const extensions: X509.Extension[] = [
    new lib.BasicConstraintsExtension(false, undefined, true),
    new lib.KeyUsagesExtension(lib.KeyUsageFlags.digitalSignature | lib.KeyUsageFlags.keyEncipherment, true),
    new lib.ExtendedKeyUsageExtension(purposes),
    await lib.SubjectKeyIdentifierExtension.create(keys.publicKey),
    await lib.AuthorityKeyIdentifierExtension.create(caCert),
  ];
  if (names.length > 0) extensions.push(new lib.SubjectAlternativeNameExtension(names));
  const cert = await lib.X509CertificateGenerator.create({
    subject: distinguishedName(request.commonName ?? request.dnsNames?.[0] ?? "kubevirt", request.organization),
    issuer: caCert.subject,
    publicKey: keys.publicKey,
    signingKey,
    signingAlgorithm: SIGNING,
    ...validityWindow(request.validityMs ?? (request.validityDays ?? 365) * DAY_MS, request.now),
    extensions,
  });
  return { certPem: cert.toString("pem"), keyPem: await keyPem(keys.privateKey) };
}

/** How long a per-migration certificate is valid (from a minute ago): the handshake that checks it follows within
 *  seconds of the handlers' exchange; an hour leaves room for a slow target pod, not for reuse. */
export const MIGRATION_CERTIFICATE_VALIDITY_MS = 3_600_000;

/**
 * A per-migration identity for one launcher (docs/decisions/0013): a fresh ECDSA P-256 key and a short-lived
 * self-signed certificate for both TLS roles. No CA: the peer accepts exactly this certificate (pinning), which the
 * two virt-handlers exchange over their mutual TLS. `commonName` names the migration and the side, for logs.
 */
export async function mintMigrationCertificate(
  commonName: string,
  validityMs = MIGRATION_CERTIFICATE_VALIDITY_MS,
  now?: Date,
): Promise<CertificateAndKey> {
  const lib = x509();
  const keys = await newKeyPair();
  const cert = await lib.X509CertificateGenerator.createSelfSigned({
    name: distinguishedName(commonName),
    keys,
    signingAlgorithm: SIGNING,
    ...validityWindow(validityMs, now),
    extensions: [
      new lib.BasicConstraintsExtension(false, undefined, true),
      new lib.KeyUsagesExtension(lib.KeyUsageFlags.digitalSignature, true),
      new lib.ExtendedKeyUsageExtension([lib.ExtendedKeyUsage.serverAuth, lib.ExtendedKeyUsage.clientAuth]),
      await lib.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return { certPem: cert.toString("pem"), keyPem: await keyPem(keys.privateKey) };
}

/** What a verifier reads from a certificate. */
export interface CertificateInfo {
  readonly subject: string;
  readonly issuer: string;
  readonly notBefore: Date;
  readonly notAfter: Date;
  /** Extended key usage OIDs (`1.3.6.1.5.5.7.3.1` serverAuth, `...3.2` clientAuth); empty when absent. */
  readonly extendedKeyUsage: readonly string[];
}

/** Reads subject, issuer and validity out of a PEM certificate; throws {@link CertificateError} on bad input. */
export function certificateInfo(certPem: string): CertificateInfo {
  const lib = x509();
  try {
    const c = new lib.X509Certificate(certPem);
    const eku = c.getExtension(lib.ExtendedKeyUsageExtension)?.usages ?? [];
    return {
      subject: c.subject,
      issuer: c.issuer,
      notBefore: c.notBefore,
      notAfter: c.notAfter,
      extendedKeyUsage: eku.map(String),
    };
  } catch (error) {
    throw new CertificateError("Cannot read the certificate: not an X.509 PEM certificate", { cause: error });
  }
}

/**
 * Whether the DER certificate `der` (a TLS peer's `getPeerCertificate().raw`) may authenticate a client: its
 * extended key usage lists clientAuth. Read here rather than from `ext_key_usage`, which Deno does not fill in.
 */
export function isClientCertificate(der: Uint8Array): boolean {
  const lib = x509();
  try {
    const eku = new lib.X509Certificate(der).getExtension(lib.ExtendedKeyUsageExtension);
    return eku?.usages.includes(lib.ExtendedKeyUsage.clientAuth) ?? false;
  } catch {
    // Unreadable: not a client certificate.
    return false;
  }
}

/** Whether `certPem` was signed by the CA `caPem` (false for unreadable input). */
export function isIssuedBy(certPem: string, caPem: string): boolean {
  try {
    const leaf = new NodeX509Certificate(certPem);
    const ca = new NodeX509Certificate(caPem);
    return leaf.checkIssued(ca) && leaf.verify(ca.publicKey);
  } catch {
    // Unreadable means "not issued by this CA": the caller replaces it.
    return false;
  }
}

/**
 * Whether a certificate should be replaced now: true when less than `fraction` (default 0.2, KubeVirt's operator
 * renews at 80% of the lifetime) of its validity is left, or when it cannot be read.
 */
export function needsRenewal(certPem: string, now = new Date(), fraction = 0.2): boolean {
  try {
    const { notBefore, notAfter } = certificateInfo(certPem);
    const lifetime = notAfter.getTime() - notBefore.getTime();
    return notAfter.getTime() - now.getTime() < lifetime * fraction;
  } catch {
    // An unreadable certificate is replaced, never trusted.
    return true;
  }
}
