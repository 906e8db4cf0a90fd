/**
 * Certificates for virt-api's HTTPS endpoints: a self-signed CA, and serving (or client) certificates it issues,
 * ECDSA P-256 with SHA-256, as PEM. Tests and the local cluster use it; a real cluster hands virt-api its
 * certificate (`--tls-cert`/`--tls-key`) and puts the CA into the webhook configurations' and the APIService's
 * `caBundle`.
 *
 *   generateCa() --> CA {certPem, keyPem}
 *        |
 *        +--> issueCertificate(ca, {dnsNames, ipAddresses, usage: "server"}) --> serving cert for virt-api
 *        +--> issueCertificate(ca, {commonName: "front-proxy-client", usage: "client"}) --> aggregator client cert
 */
import {
  createHash,
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  type KeyObject,
  randomBytes,
  sign,
} from "node:crypto";
import { isIP } from "node:net";
import {
  bitString,
  boolean,
  explicit,
  implicitPrimitive,
  integer,
  octetString,
  oid,
  sequence,
  set,
  smallInteger,
  time,
  utf8String,
} from "./der.ts";

/** A certificate and its private key, PEM-encoded. */
export interface CertificateAndKey {
  /** `-----BEGIN CERTIFICATE-----` PEM. */
  readonly certPem: string;
  /** PKCS#8 `-----BEGIN PRIVATE KEY-----` PEM. */
  readonly keyPem: string;
}

/** What to put into an issued certificate. */
export interface CertificateRequest {
  /** Subject CN; default: the first DNS name, else `virt-api`. */
  readonly commonName?: string;
  /** Subject O (for client certificates this is the user's group). */
  readonly organization?: string;
  /** subjectAltName DNS entries, e.g. `virt-api.kubevirt.svc`, `localhost`. */
  readonly dnsNames?: readonly string[];
  /** subjectAltName IP entries, e.g. `127.0.0.1`. */
  readonly ipAddresses?: readonly string[];
  /** `server` (serverAuth) or `client` (clientAuth); default `server`. */
  readonly usage?: "server" | "client";
  /** Validity in days from now; default 365. */
  readonly validityDays?: number;
}

const OID = {
  ecdsaWithSha256: "1.2.840.10045.4.3.2",
  commonName: "2.5.4.3",
  organization: "2.5.4.10",
  subjectKeyIdentifier: "2.5.29.14",
  keyUsage: "2.5.29.15",
  subjectAltName: "2.5.29.17",
  basicConstraints: "2.5.29.19",
  authorityKeyIdentifier: "2.5.29.35",
  extKeyUsage: "2.5.29.37",
  serverAuth: "1.3.6.1.5.5.7.3.1",
  clientAuth: "1.3.6.1.5.5.7.3.2",
} as const;

function name(commonName: string, organization?: string): Uint8Array {
  const rdns = [];
  if (organization) rdns.push(set(sequence(oid(OID.organization), utf8String(organization))));
  rdns.push(set(sequence(oid(OID.commonName), utf8String(commonName))));
  return sequence(...rdns);
}

function extension(id: string, critical: boolean, value: Uint8Array): Uint8Array {
  return critical ? sequence(oid(id), boolean(true), octetString(value)) : sequence(oid(id), octetString(value));
}

function keyIdentifier(spki: Uint8Array): Uint8Array {
  return new Uint8Array(createHash("sha1").update(spki).digest());
}

function ipBytes(ip: string): Uint8Array {
  if (isIP(ip) === 4) return Uint8Array.from(ip.split(".").map(Number));
  const [head = "", tail = ""] = ip.split("::");
  const h = head ? head.split(":") : [];
  const t = tail ? tail.split(":") : [];
  const groups = ip.includes("::") ? [...h, ...Array<string>(8 - h.length - t.length).fill("0"), ...t] : h;
  return Uint8Array.from(groups.flatMap((g) => [parseInt(g, 16) >> 8, parseInt(g, 16) & 0xff]));
}

function toPem(label: string, der: Uint8Array): string {
  const b64 = Buffer.from(der).toString("base64");
  return `-----BEGIN ${label}-----\n${b64.match(/.{1,64}/g)?.join("\n") ?? ""}\n-----END ${label}-----\n`;
}

function fromPem(pem: string): Uint8Array {
  const b64 = pem.replace(/-----[^-]+-----/g, "").replace(/\s+/g, "");
  return new Uint8Array(Buffer.from(b64, "base64"));
}

interface SignInput {
  readonly subject: Uint8Array;
  readonly issuer: Uint8Array;
  readonly spki: Uint8Array;
  readonly issuerSpki: Uint8Array;
  readonly extensions: Uint8Array[];
  readonly validityDays: number;
  readonly signer: KeyObject;
}

function signCertificate(input: SignInput): Uint8Array {
  const now = Date.now();
  const serial = randomBytes(16);
  serial[0] = (serial[0] ?? 0) & 0x7f;
  const algorithm = sequence(oid(OID.ecdsaWithSha256));
  const tbs = sequence(
    explicit(0, smallInteger(2)),
    integer(serial),
    algorithm,
    input.issuer,
    sequence(time(new Date(now - 60_000)), time(new Date(now + input.validityDays * 86_400_000))),
    input.subject,
    input.spki,
    explicit(
      3,
      sequence(
        extension(OID.subjectKeyIdentifier, false, octetString(keyIdentifier(input.spki))),
        extension(OID.authorityKeyIdentifier, false, sequence(implicitPrimitive(0, keyIdentifier(input.issuerSpki)))),
        ...input.extensions,
      ),
    ),
  );
  const signature = new Uint8Array(sign("sha256", tbs, input.signer));
  return sequence(tbs, algorithm, bitString(signature));
}

function newKeyPair(): { privateKey: KeyObject; spki: Uint8Array } {
  const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
  return { privateKey, spki: new Uint8Array(publicKey.export({ type: "spki", format: "der" })) };
}

function keyPem(key: KeyObject): string {
  return key.export({ type: "pkcs8", format: "pem" }).toString();
}

/** Generates a self-signed CA (basicConstraints CA:TRUE, keyCertSign), valid `validityDays` (default 3650). */
export function generateCa(commonName = "kubevirt-ts-ca", validityDays = 3650): CertificateAndKey {
  const { privateKey, spki } = newKeyPair();
  const subject = name(commonName);
  const der = signCertificate({
    subject,
    issuer: subject,
    spki,
    issuerSpki: spki,
    validityDays,
    signer: privateKey,
    extensions: [
      extension(OID.basicConstraints, true, sequence(boolean(true))),
      // keyUsage: digitalSignature(0), keyCertSign(5), cRLSign(6) -> 1000 0110, one unused bit.
      extension(OID.keyUsage, true, bitString(Uint8Array.of(0x86), 1)),
    ],
  });
  return { certPem: toPem("CERTIFICATE", der), keyPem: keyPem(privateKey) };
}

/** Issues a leaf certificate signed by `ca` for the names in `request`. */
export function issueCertificate(ca: CertificateAndKey, request: CertificateRequest): CertificateAndKey {
  const { privateKey, spki } = newKeyPair();
  const caCert = fromPem(ca.certPem);
  const caKey = createPrivateKey(ca.keyPem);
  const caSpki = new Uint8Array(createPublicKey(caKey).export({ type: "spki", format: "der" }));
  const sans = [
    ...(request.dnsNames ?? []).map((d) => implicitPrimitive(2, new TextEncoder().encode(d))),
    ...(request.ipAddresses ?? []).map((ip) => implicitPrimitive(7, ipBytes(ip))),
  ];
  const usage = request.usage === "client" ? OID.clientAuth : OID.serverAuth;
  const extensions = [
    extension(OID.basicConstraints, true, sequence()),
    // keyUsage: digitalSignature(0), keyEncipherment(2) -> 1010 0000, five unused bits.
    extension(OID.keyUsage, true, bitString(Uint8Array.of(0xa0), 5)),
    extension(OID.extKeyUsage, false, sequence(oid(usage))),
  ];
  if (sans.length > 0) extensions.push(extension(OID.subjectAltName, false, sequence(...sans)));
  const der = signCertificate({
    subject: name(request.commonName ?? request.dnsNames?.[0] ?? "virt-api", request.organization),
    issuer: issuerName(caCert),
    spki,
    issuerSpki: caSpki,
    validityDays: request.validityDays ?? 365,
    signer: caKey,
    extensions,
  });
  return { certPem: toPem("CERTIFICATE", der), keyPem: keyPem(privateKey) };
}

/** Reads the subject Name out of a DER certificate, to use verbatim as the issuer of certificates it signs. */
function issuerName(certDer: Uint8Array): Uint8Array {
  // Certificate ::= SEQ { tbs SEQ { [0] version, serial, sigAlg, issuer, validity, subject, ... } ... }
  const tbs = children(children(certDer, 0)[0] ?? new Uint8Array(0), 0);
  return tbs[5] ?? new Uint8Array(0);
}

/** Splits the content of the TLV at `offset` of `der` into its child TLVs. */
function children(der: Uint8Array, offset: number): Uint8Array[] {
  const { contentStart, end } = header(der, offset);
  const out: Uint8Array[] = [];
  for (let at = contentStart; at < end; ) {
    const h = header(der, at);
    out.push(der.subarray(at, h.end));
    at = h.end;
  }
  return out;
}

function header(der: Uint8Array, offset: number): { contentStart: number; end: number } {
  const first = der[offset + 1] ?? 0;
  if (first < 0x80) return { contentStart: offset + 2, end: offset + 2 + first };
  const n = first & 0x7f;
  let length = 0;
  for (let i = 0; i < n; i++) length = length * 256 + (der[offset + 2 + i] ?? 0);
  return { contentStart: offset + 2 + n, end: offset + 2 + n + length };
}
