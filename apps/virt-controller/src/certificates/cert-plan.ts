/**
 * What the certificate manager does with each certificate Secret (pure), as virt-operator decides it
 * (resource/apply/core.go certificationNeedsRotation):
 *
 *   Secret ──missing────────────────────────────> issue (Missing)
 *     │ ──tls.crt/tls.key absent, not PEM, or the key is not the certificate's ──> issue (Invalid), with a Warning
 *     │ ──kubevirt.io/duration != the configured duration ──> issue (DurationChanged)
 *     │ ──a leaf the current CA did not sign ────────> issue (CaRotated)
 *     │ ──a leaf without an extended key usage its use needs ──> issue (UsageChanged)
 *     │ ──now >= rotation deadline (libs/certs rotationDeadline) ──> issue (Expiring)
 *     └─────────────────────────────────────────────> keep until the deadline
 *
 * The components' certificates, with virt-operator's names and subjects (components/secrets.go populationStrategy):
 *
 * | Secret                             | subject CN                                | SANs (DNS)                          | use    |
 * | ---------------------------------- | ----------------------------------------- | ----------------------------------- | ------ |
 * | kubevirt-virt-api-certs            | virt-api.<ns>.pod.cluster.local           | virt-api[.<ns>[.svc[.cluster.local]]] | server |
 * | kubevirt-virt-handler-server-certs | kubevirt.io:system:node:virt-handler      | virt-handler[.<ns>[.svc[...]]]      | both   |
 * | kubevirt-virt-handler-certs        | kubevirt.io:system:client:virt-handler    | none                                | client |
 *
 * virt-handler's serving certificate is also its client certificate towards the other handlers (the migration
 * secret, apps/virt-handler migration/migration-secrets.ts), hence `both`: virt-api's client certificate (the
 * last row) is thus never accepted where only a handler may ask, nor a handler's on virt-api's endpoints.
 */
import { X509Certificate } from "node:crypto";
import { CERTIFICATES } from "@kvt/api";
import {
  type CertificateAndKey,
  type CertificateRequest,
  certificateInfo,
  isIssuedBy,
  keyMatchesCertificate,
  rotationDeadline,
} from "@kvt/certs";
import type { KubeObject } from "@kvt/kube";

/** A core/v1 Secret, as far as the manager reads and writes it. */
export interface Secret extends KubeObject {
  type?: string;
  /** Base64 values. */
  data?: Record<string, string>;
}

/** A core/v1 ConfigMap. */
export interface ConfigMap extends KubeObject {
  data?: Record<string, string>;
}

/** The keys of a kubernetes.io/tls Secret (KubeVirt's bootstrap.CertBytesValue / KeyBytesValue). */
export const TLS_CERT_KEY = "tls.crt";
export const TLS_KEY_KEY = "tls.key";

/** Why a certificate is (re)issued; the Normal event's and the log's reason. */
export type RenewReason = "Missing" | "Invalid" | "DurationChanged" | "CaRotated" | "UsageChanged" | "Expiring";

/** What to do with one certificate Secret. */
export type CertDecision =
  | { readonly renew: false; readonly pair: CertificateAndKey; readonly deadline: Date }
  | { readonly renew: true; readonly reason: RenewReason; readonly detail: string };

/** A Secret's certificate and key, or why they cannot be used. */
export type SecretPair =
  | { readonly state: "missing" }
  | { readonly state: "invalid"; readonly detail: string }
  | { readonly state: "ok"; readonly pair: CertificateAndKey; readonly duration: string | undefined };

function decoded(secret: Secret, key: string): string | undefined {
  const v = secret.data?.[key];
  return v === undefined ? undefined : Buffer.from(v, "base64").toString("utf8");
}

/**
 * Reads `tls.crt` and `tls.key` of `secret` (KubeVirt's LoadCertificates: both present, parse, and pair up); with
 * `ca`, the certificate must also be a CA (basicConstraints CA:TRUE), or nothing it signs would verify.
 */
export function readSecretPair(secret: Secret | undefined, ca = false): SecretPair {
  if (!secret) return { state: "missing" };
  const certPem = decoded(secret, TLS_CERT_KEY);
  const keyPem = decoded(secret, TLS_KEY_KEY);
  if (certPem === undefined || keyPem === undefined) {
    const absent = certPem === undefined ? TLS_CERT_KEY : TLS_KEY_KEY;
    return { state: "invalid", detail: `${absent} value not found in ${secret.metadata?.name ?? ""} secret` };
  }
  let isCa: boolean;
  try {
    certificateInfo(certPem);
    isCa = new X509Certificate(certPem).ca;
  } catch {
    // Garbage in tls.crt: the Secret is replaced, never served.
    return { state: "invalid", detail: `${TLS_CERT_KEY} is not a PEM X.509 certificate` };
  }
  if (ca && !isCa) return { state: "invalid", detail: `${TLS_CERT_KEY} is not a CA certificate` };
  if (!keyMatchesCertificate(certPem, keyPem)) {
    return { state: "invalid", detail: `${TLS_KEY_KEY} is not the private key of ${TLS_CERT_KEY}` };
  }
  return {
    state: "ok",
    pair: { certPem, keyPem },
    duration: secret.metadata?.annotations?.[CERTIFICATES.durationAnnotation],
  };
}

/** What {@link decide} weighs for one Secret. */
export interface DecideInput {
  readonly stored: SecretPair;
  /** The configured duration as Go text (the annotation it must carry). */
  readonly duration: string;
  /** The current CA, for a leaf; absent for the CA itself. */
  readonly caPem?: string;
  readonly renewBeforeMs: number;
  readonly caRenewBeforeMs?: number;
  /** A leaf's use: the extended key usages it must carry (serverAuth, clientAuth, or both). */
  readonly usage?: "server" | "client" | "both";
  readonly now: Date;
}

const SERVER_AUTH = "1.3.6.1.5.5.7.3.1";
const CLIENT_AUTH = "1.3.6.1.5.5.7.3.2";

/** The purposes `usage` needs that `certPem` lacks (OIDs), e.g. a serving certificate issued before it was both. */
function missingUsages(certPem: string, usage: "server" | "client" | "both"): string[] {
  const has = certificateInfo(certPem).extendedKeyUsage;
  const needs = [...(usage !== "client" ? [SERVER_AUTH] : []), ...(usage !== "server" ? [CLIENT_AUTH] : [])];
  return needs.filter((oid) => !has.includes(oid));
}

/** Keep the stored certificate until its deadline, or issue a new one (and why). */
export function decide(input: DecideInput): CertDecision {
  const s = input.stored;
  if (s.state === "missing") return { renew: true, reason: "Missing", detail: "no Secret yet" };
  if (s.state === "invalid") return { renew: true, reason: "Invalid", detail: s.detail };
  if (s.duration !== input.duration) {
    return {
      renew: true,
      reason: "DurationChanged",
      detail: `issued for ${s.duration ?? "an unknown duration"}, configured ${input.duration}`,
    };
  }
  if (input.caPem !== undefined && !isIssuedBy(s.pair.certPem, input.caPem)) {
    return { renew: true, reason: "CaRotated", detail: "not signed by the current KubeVirt CA" };
  }
  const missing = input.usage ? missingUsages(s.pair.certPem, input.usage) : [];
  if (missing.length > 0) {
    return { renew: true, reason: "UsageChanged", detail: `issued without extended key usage ${missing.join(", ")}` };
  }
  const deadline = rotationDeadline({
    certPem: s.pair.certPem,
    caPem: input.caPem,
    renewBeforeMs: input.renewBeforeMs,
    caRenewBeforeMs: input.caRenewBeforeMs,
    now: input.now,
  });
  if (deadline.getTime() <= input.now.getTime()) {
    return { renew: true, reason: "Expiring", detail: `due since ${deadline.toISOString()}` };
  }
  return { renew: false, pair: s.pair, deadline };
}

/** One component certificate the manager keeps. */
export interface LeafSpec {
  readonly secret: string;
  readonly request: Omit<CertificateRequest, "validityDays" | "validityMs" | "now">;
}

/** The DNS names KubeVirt gives a Service's certificate (triple.NewServerKeyPair). */
function serviceNames(service: string, namespace: string): string[] {
  const namespaced = `${service}.${namespace}`;
  return [service, namespaced, `${namespaced}.svc`, `${namespaced}.svc.cluster.local`];
}

/** The component certificates of an install in `namespace`, in KubeVirt's order. */
export function leafSpecs(namespace: string): LeafSpec[] {
  return [
    {
      secret: CERTIFICATES.virtApi,
      request: {
        commonName: `virt-api.${namespace}.pod.cluster.local`,
        dnsNames: serviceNames("virt-api", namespace),
        usage: "server",
      },
    },
    {
      secret: CERTIFICATES.handlerServer,
      request: {
        commonName: "kubevirt.io:system:node:virt-handler",
        dnsNames: serviceNames("virt-handler", namespace),
        usage: "both",
      },
    },
    {
      secret: CERTIFICATES.handlerClient,
      request: { commonName: "kubevirt.io:system:client:virt-handler", usage: "client" },
    },
  ];
}

/** The Secret holding `pair`: kubernetes.io/tls, with the duration annotation and KubeVirt's managed-by label. */
export function certificateSecret(
  name: string,
  namespace: string,
  pair: CertificateAndKey,
  duration: string,
  existing?: Secret,
): Secret {
  const b64 = (s: string): string => Buffer.from(s, "utf8").toString("base64");
  const base: Secret = existing ? structuredClone(existing) : { metadata: { name, namespace } };
  const metadata = base.metadata ?? { name, namespace };
  return {
    ...base,
    apiVersion: "v1",
    kind: "Secret",
    metadata: {
      ...metadata,
      labels: { ...metadata.labels, "app.kubernetes.io/managed-by": "virt-operator" },
      annotations: { ...metadata.annotations, [CERTIFICATES.durationAnnotation]: duration },
    },
    // The type of an existing Secret cannot change: keep it (KubeVirt patches data and metadata only).
    type: existing?.type ?? "kubernetes.io/tls",
    data: { [TLS_CERT_KEY]: b64(pair.certPem), [TLS_KEY_KEY]: b64(pair.keyPem) },
  };
}
