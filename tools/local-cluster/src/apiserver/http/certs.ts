/**
 * A generated certificate authority and serving certificate (ECDSA P-256), written with a minimal DER encoder:
 * kubectl (client-go) never sends a bearer token over plain HTTP, so the server speaks TLS and the kubeconfig
 * carries the CA. Certificates are kept in the data directory so kubeconfigs survive restarts.
 *
 *   Certificate ::= SEQUENCE { tbsCertificate, signatureAlgorithm (ecdsa-with-SHA256), signatureValue BIT STRING }
 *   tbsCertificate ::= SEQUENCE { [0] v3, serial, sigAlg, issuer, validity, subject, spki, [3] extensions }
 */
import { createPrivateKey, generateKeyPairSync, type KeyObject, randomBytes, sign } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

function len(n: number): Buffer {
  if (n < 0x80) return Buffer.from([n]);
  const bytes: number[] = [];
  for (let v = n; v > 0; v >>= 8) bytes.unshift(v & 0xff);
  return Buffer.from([0x80 | bytes.length, ...bytes]);
}
const tlv = (tag: number, ...content: Buffer[]): Buffer => {
  const body = Buffer.concat(content);
  return Buffer.concat([Buffer.from([tag]), len(body.length), body]);
};
const seq = (...c: Buffer[]): Buffer => tlv(0x30, ...c);
function oid(s: string): Buffer {
  const parts = s.split(".").map(Number);
  const out: number[] = [40 * parts[0] + parts[1]];
  for (const p of parts.slice(2)) {
    const stack: number[] = [p & 0x7f];
    for (let v = p >> 7; v > 0; v >>= 7) stack.unshift((v & 0x7f) | 0x80);
    out.push(...stack);
  }
  return tlv(0x06, Buffer.from(out));
}
function integer(b: Buffer): Buffer {
  // DER wants the shortest form: a random serial starting 0x00 0x0X would be "illegal padding" to OpenSSL.
  let i = 0;
  while (i < b.length - 1 && b[i] === 0 && (b[i + 1] & 0x80) === 0) i++;
  const v = b.subarray(i);
  return tlv(0x02, v[0] & 0x80 ? Buffer.concat([Buffer.from([0]), v]) : v);
}
const utf8 = (s: string): Buffer => tlv(0x0c, Buffer.from(s, "utf8"));
function time(d: Date): Buffer {
  const s = d.toISOString().replace(/[-:T]/g, "").slice(0, 14);
  return d.getUTCFullYear() < 2050 ? tlv(0x17, Buffer.from(`${s.slice(2)}Z`)) : tlv(0x18, Buffer.from(`${s}Z`));
}
const name = (cn: string): Buffer => seq(tlv(0x31, seq(oid("2.5.4.3"), utf8(cn))));
const ext = (id: string, critical: boolean, value: Buffer): Buffer =>
  seq(oid(id), ...(critical ? [tlv(0x01, Buffer.from([0xff]))] : []), tlv(0x04, value));
const ECDSA_SHA256 = seq(oid("1.2.840.10045.4.3.2"));

interface CertSpec {
  subject: string;
  issuer: string;
  publicKey: KeyObject;
  signer: KeyObject;
  ca: boolean;
  ips?: string[];
  dns?: string[];
}

function certificate(s: CertSpec): Buffer {
  const now = Date.now();
  const exts: Buffer[] = [
    ext("2.5.29.19", true, seq(...(s.ca ? [tlv(0x01, Buffer.from([0xff]))] : []))),
    ext("2.5.29.15", true, s.ca ? tlv(0x03, Buffer.from([0x01, 0x06])) : tlv(0x03, Buffer.from([0x05, 0xa0]))),
  ];
  if (!s.ca) {
    exts.push(ext("2.5.29.37", false, seq(oid("1.3.6.1.5.5.7.3.1"))));
    const names = [
      ...(s.dns ?? []).map((d) => tlv(0x82, Buffer.from(d))),
      ...(s.ips ?? []).map((ip) => tlv(0x87, Buffer.from(ip.split(".").map(Number)))),
    ];
    exts.push(ext("2.5.29.17", false, seq(...names)));
  }
  const tbs = seq(
    tlv(0xa0, integer(Buffer.from([2]))),
    integer(randomBytes(16)),
    ECDSA_SHA256,
    name(s.issuer),
    seq(time(new Date(now - 3600_000)), time(new Date(now + 10 * 365 * 86400_000))),
    name(s.subject),
    s.publicKey.export({ type: "spki", format: "der" }),
    tlv(0xa3, seq(...exts)),
  );
  const sig = sign("sha256", tbs, s.signer);
  return seq(tbs, ECDSA_SHA256, tlv(0x03, Buffer.concat([Buffer.from([0]), sig])));
}

function pem(der: Buffer): string {
  const b64 = der
    .toString("base64")
    .replace(/(.{64})/g, "$1\n")
    .replace(/\n$/, "");
  return `-----BEGIN CERTIFICATE-----\n${b64}\n-----END CERTIFICATE-----\n`;
}

/** PEM material for the TLS server and the kubeconfig. */
export interface ServingCerts {
  readonly caCert: string;
  readonly cert: string;
  readonly key: string;
}

/** Generates a CA and a serving certificate for 127.0.0.1 / localhost. */
export function generateCerts(): ServingCerts {
  const ca = generateKeyPairSync("ec", { namedCurve: "prime256v1" });
  const srv = generateKeyPairSync("ec", { namedCurve: "prime256v1" });
  const caCert = certificate({
    subject: "kvt-local-ca",
    issuer: "kvt-local-ca",
    publicKey: ca.publicKey,
    signer: ca.privateKey,
    ca: true,
  });
  const cert = certificate({
    subject: "kvt-apiserver",
    issuer: "kvt-local-ca",
    publicKey: srv.publicKey,
    signer: ca.privateKey,
    ca: false,
    ips: ["127.0.0.1"],
    dns: ["localhost"],
  });
  return {
    caCert: pem(caCert),
    cert: pem(cert),
    key: srv.privateKey.export({ type: "pkcs8", format: "pem" }) as string,
  };
}

/** Loads the certificates kept in `dir`, generating them on first use. */
export function loadOrGenerateCerts(dir: string | undefined): ServingCerts {
  if (dir) {
    const files = ["ca.crt", "apiserver.crt", "apiserver.key"].map((f) => join(dir, f));
    if (files.every((f) => existsSync(f))) {
      const [caCert, cert, key] = files.map((f) => readFileSync(f, "utf8")) as [string, string, string];
      createPrivateKey(key);
      return { caCert, cert, key };
    }
    const c = generateCerts();
    writeFileSync(files[0], c.caCert);
    writeFileSync(files[1], c.cert);
    writeFileSync(files[2], c.key, { mode: 0o600 });
    return c;
  }
  return generateCerts();
}
