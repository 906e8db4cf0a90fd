/**
 * The certificate manager: virt-operator's certificate duty (resource/apply/core.go
 * createOrUpdateComponentsWithCertificates), run by the virt-controller leader. One reconcile, in KubeVirt's order:
 *
 *   1. Secret kubevirt-ca            the KubeVirt CA (CN kubevirt.io@<unix time>), made or renewed (cert-plan.ts)
 *   2. ConfigMap kubevirt-ca         ca-bundle = the current CA + older CAs for the overlap (libs/certs mergeCaBundle)
 *   3. caBundle of the webhooks and APIServices (CA_BUNDLE_TARGETS) = that bundle
 *   4. the components' Secrets       kubevirt-virt-api-certs, kubevirt-virt-handler-server-certs,
 *                                    kubevirt-virt-handler-certs: made, or renewed before they expire
 *   -> come back at the earliest deadline (a renewal, the end of a CA overlap), and at least every minute, so a
 *      deleted or damaged object is put back.
 *
 * The components load their certificates from the Secrets (mounted as files) and trust the bundle (the ConfigMap),
 * and reload both without a restart. A Secret holding garbage is replaced, with a Warning event on it.
 */
import { CA_BUNDLE_TARGETS, CERTIFICATES, formatGoDuration, type KubeVirtSelfSignConfiguration } from "@kvt/api";
import {
  type CertificateAndKey,
  certificateInfo,
  generateCa,
  issueCertificate,
  type MergedBundle,
  mergeCaBundle,
  rotationDeadline,
} from "@kvt/certs";
import {
  type EventSink,
  isNotFound,
  type KubeObject,
  type ReconcileContext,
  type Reconciler,
  type ResourceClient,
  type ResourceType,
  type Result,
  requeueAfter,
} from "@kvt/kube";
import {
  type ConfigMap,
  certificateSecret,
  decide,
  type LeafSpec,
  leafSpecs,
  readSecretPair,
  type Secret,
} from "./cert-plan.ts";
import { type CertSettings, certSettings } from "./cert-settings.ts";

/** The kinds whose caBundle the manager sets. */
export const BUNDLE_TARGET_TYPES = {
  mutatingWebhookConfigurations: {
    group: "admissionregistration.k8s.io",
    version: "v1",
    plural: "mutatingwebhookconfigurations",
    kind: "MutatingWebhookConfiguration",
    namespaced: false,
  },
  validatingWebhookConfigurations: {
    group: "admissionregistration.k8s.io",
    version: "v1",
    plural: "validatingwebhookconfigurations",
    kind: "ValidatingWebhookConfiguration",
    namespaced: false,
  },
  apiServices: {
    group: "apiregistration.k8s.io",
    version: "v1",
    plural: "apiservices",
    kind: "APIService",
    namespaced: false,
  },
} as const satisfies Record<keyof typeof CA_BUNDLE_TARGETS, ResourceType>;

/** Look again at least this often (ms): a deleted Secret or a caBundle reset by a re-apply is put back. */
export const RESYNC_MS = 60_000;
/** Never come back sooner than this (ms), so a deadline in the past cannot spin. */
const MIN_REQUEUE_MS = 1000;

type Client<T extends KubeObject> = Pick<ResourceClient<T>, "get" | "create" | "update">;

/** What the manager reads and writes. */
export interface CertManagerDeps {
  /** The install namespace: where the Secrets and the ConfigMap live. */
  readonly namespace: string;
  readonly secrets: Client<Secret>;
  readonly configMaps: Client<ConfigMap>;
  /** Clients for the caBundle targets, by kind. */
  readonly bundleTargets: Readonly<
    Record<keyof typeof CA_BUNDLE_TARGETS, Pick<ResourceClient<KubeObject>, "get" | "update">>
  >;
  /** The KubeVirt CR's `spec.certificateRotateStrategy.selfSigned` (read at each reconcile). */
  readonly selfSigned: () => KubeVirtSelfSignConfiguration | undefined;
  readonly recorder: EventSink;
  /** The clock; default the system's. */
  readonly now?: () => Date;
}

/** A certificate in use and when to look at it again. */
interface Held {
  readonly pair: CertificateAndKey;
  readonly deadline: Date;
}

/** What one Secret is for: how long, how to make it, and which CA signs it (none for the CA). */
interface SecretJob {
  readonly name: string;
  readonly durationMs: number;
  readonly renewBeforeMs: number;
  readonly ca?: CertificateAndKey;
  readonly caRenewBeforeMs?: number;
  /** A leaf's purposes: one issued without one of them is replaced. */
  readonly usage?: "server" | "client" | "both";
  readonly issue: () => Promise<CertificateAndKey>;
}

const b64 = (s: string): string => Buffer.from(s, "utf8").toString("base64");

async function getOrUndefined<T extends KubeObject>(client: Pick<ResourceClient<T>, "get">, ns: string, name: string) {
  try {
    return await client.get(ns, name);
  } catch (error) {
    if (isNotFound(error)) return undefined;
    throw error;
  }
}

/** Keeps the KubeVirt CA, its bundle, the caBundles and the components' certificates (leader only). */
export class CertificateManager implements Reconciler {
  readonly #d: CertManagerDeps;
  #reportedProblems = "";

  constructor(deps: CertManagerDeps) {
    this.#d = deps;
  }

  async reconcile(_key: unknown, ctx: ReconcileContext): Promise<Result> {
    const now = this.#d.now?.() ?? new Date();
    const settings = this.#settings(ctx);
    const ca = await this.#ensureCa(settings, now, ctx);
    const bundle = await this.#ensureBundle(ca.pair, settings, now, ctx);
    await this.#injectBundle(bundle.bundle, ctx);
    const deadlines = [ca.deadline.getTime()];
    if (bundle.count > 1) {
      // The old CA leaves the bundle once the current one is older than the overlap.
      deadlines.push(certificateInfo(ca.pair.certPem).notBefore.getTime() + settings.caRenewBeforeMs + 1);
    }
    for (const spec of leafSpecs(this.#d.namespace)) {
      const leaf = await this.#ensureLeaf(spec, ca.pair, settings, now, ctx);
      deadlines.push(leaf.deadline.getTime());
    }
    const wait = Math.min(...deadlines) - now.getTime();
    return requeueAfter(Math.min(RESYNC_MS, Math.max(MIN_REQUEUE_MS, wait)));
  }

  #settings(ctx: ReconcileContext): CertSettings {
    const { settings, problems } = certSettings(this.#d.selfSigned());
    const text = problems.join("; ");
    if (text !== this.#reportedProblems && text !== "") {
      ctx.logger.warn({ problems }, "KubeVirt CR certificateRotateStrategy has values that cannot be used");
    }
    this.#reportedProblems = text;
    return settings;
  }

  async #ensureCa(s: CertSettings, now: Date, ctx: ReconcileContext): Promise<Held> {
    return await this.#ensureSecret(
      {
        name: CERTIFICATES.caSecret,
        durationMs: s.caDurationMs,
        renewBeforeMs: s.caRenewBeforeMs,
        issue: () => generateCa(`kubevirt.io@${Math.floor(now.getTime() / 1000)}`, { durationMs: s.caDurationMs, now }),
      },
      now,
      ctx,
    );
  }

  async #ensureLeaf(
    spec: LeafSpec,
    ca: CertificateAndKey,
    s: CertSettings,
    now: Date,
    ctx: ReconcileContext,
  ): Promise<Held> {
    return await this.#ensureSecret(
      {
        name: spec.secret,
        durationMs: s.certDurationMs,
        renewBeforeMs: s.certRenewBeforeMs,
        ca,
        caRenewBeforeMs: s.caRenewBeforeMs,
        usage: spec.request.usage ?? "server",
        issue: () => issueCertificate(ca, { ...spec.request, validityMs: s.certDurationMs, now }),
      },
      now,
      ctx,
    );
  }

  async #ensureSecret(job: SecretJob, now: Date, ctx: ReconcileContext): Promise<Held> {
    const { namespace, secrets, recorder } = this.#d;
    const duration = formatGoDuration(job.durationMs);
    const existing = await getOrUndefined(secrets, namespace, job.name);
    const stored = readSecretPair(existing, job.ca === undefined);
    const decision = decide({
      stored,
      duration,
      caPem: job.ca?.certPem,
      renewBeforeMs: job.renewBeforeMs,
      caRenewBeforeMs: job.caRenewBeforeMs,
      ...(job.usage ? { usage: job.usage } : {}),
      now,
    });
    if (!decision.renew) return { pair: decision.pair, deadline: decision.deadline };
    const log = ctx.logger.child({ secret: `${namespace}/${job.name}`, reason: decision.reason });
    if (decision.reason === "Invalid" && existing) {
      log.warn({ detail: decision.detail }, "certificate Secret cannot be used; replacing it");
      recorder.event(
        secretRef(existing, namespace, job.name),
        "Warning",
        "InvalidCertificate",
        `Secret ${job.name} holds no usable certificate (${decision.detail}); issuing a new one`,
      );
    }
    const pair = await job.issue();
    const body = certificateSecret(job.name, namespace, pair, duration, existing);
    const written = existing ? await secrets.update(body) : await secrets.create(body);
    const { notAfter } = certificateInfo(pair.certPem);
    log.info({ detail: decision.detail, notAfter: notAfter.toISOString() }, "issued a certificate");
    recorder.event(
      secretRef(written, namespace, job.name),
      "Normal",
      "CertificateIssued",
      `Issued a certificate for Secret ${job.name}, valid until ${notAfter.toISOString()} (${decision.reason}: ${decision.detail})`,
    );
    const deadline = rotationDeadline({
      certPem: pair.certPem,
      caPem: job.ca?.certPem,
      renewBeforeMs: job.renewBeforeMs,
      caRenewBeforeMs: job.caRenewBeforeMs,
      now,
    });
    return { pair, deadline };
  }

  async #ensureBundle(ca: CertificateAndKey, s: CertSettings, now: Date, ctx: ReconcileContext): Promise<MergedBundle> {
    const { namespace, configMaps } = this.#d;
    const name = CERTIFICATES.caConfigMap;
    const existing = await getOrUndefined(configMaps, namespace, name);
    const current = existing?.data?.[CERTIFICATES.caBundleKey] ?? "";
    let merged: MergedBundle;
    try {
      merged = mergeCaBundle(ca.certPem, current, s.caRenewBeforeMs, now);
    } catch (error) {
      // KubeVirt likewise replaces a bundle it cannot parse with the current CA alone.
      ctx.logger.warn({ err: error, configMap: `${namespace}/${name}` }, "CA bundle cannot be read; replacing it");
      merged = mergeCaBundle(ca.certPem, "", s.caRenewBeforeMs, now);
    }
    if (existing && current === merged.bundle) return merged;
    const data = { ...existing?.data, [CERTIFICATES.caBundleKey]: merged.bundle };
    if (existing) {
      await configMaps.update({ ...structuredClone(existing), data });
    } else {
      await configMaps.create({
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name, namespace, labels: { "app.kubernetes.io/managed-by": "virt-operator" } },
        data,
      });
    }
    ctx.logger.info({ configMap: `${namespace}/${name}`, certificates: merged.count }, "CA bundle written");
    return merged;
  }

  /** Sets every caBundle of the webhooks and APIServices to `bundle`; an object not (yet) there is skipped. */
  async #injectBundle(bundle: string, ctx: ReconcileContext): Promise<void> {
    const encoded = b64(bundle);
    for (const kind of Object.keys(CA_BUNDLE_TARGETS) as (keyof typeof CA_BUNDLE_TARGETS)[]) {
      const client = this.#d.bundleTargets[kind];
      for (const name of CA_BUNDLE_TARGETS[kind]) {
        const obj = await getOrUndefined(client, "", name);
        if (!obj) {
          ctx.logger.debug({ kind, name }, "no object to inject the CA bundle into");
          continue;
        }
        const updated = withCaBundle(obj, encoded);
        if (!updated) continue;
        await client.update(updated);
        ctx.logger.info({ kind: BUNDLE_TARGET_TYPES[kind].kind, name }, "CA bundle injected");
      }
    }
  }
}

/**
 * `obj` with every caBundle (each webhook's clientConfig, or an APIService's spec) set to `encoded`, or undefined
 * when all already are.
 */
export function withCaBundle(obj: KubeObject, encoded: string): KubeObject | undefined {
  const copy = structuredClone(obj) as KubeObject & {
    webhooks?: { clientConfig?: { caBundle?: string } }[];
    spec?: { caBundle?: string };
  };
  let changed = false;
  if (Array.isArray(copy.webhooks)) {
    for (const hook of copy.webhooks) {
      hook.clientConfig ??= {};
      if (hook.clientConfig.caBundle === encoded) continue;
      hook.clientConfig.caBundle = encoded;
      changed = true;
    }
  } else if (copy.spec && copy.spec.caBundle !== encoded) {
    copy.spec.caBundle = encoded;
    changed = true;
  }
  return changed ? copy : undefined;
}

/** The event target for a Secret (its uid, when the API returned one). */
function secretRef(secret: Secret, namespace: string, name: string): KubeObject {
  return {
    apiVersion: "v1",
    kind: "Secret",
    metadata: { name, namespace, uid: secret.metadata?.uid, resourceVersion: secret.metadata?.resourceVersion },
  };
}
