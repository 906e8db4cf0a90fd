import { X509Certificate } from "node:crypto";
import { CA_BUNDLE_TARGETS, CERTIFICATES, type KubeVirtSelfSignConfiguration, objectKey } from "@kvt/api";
import { certificateInfo, isIssuedBy, splitCertificates } from "@kvt/certs";
import { CORE_V1, type KubeObject } from "@kvt/kube";
import { FakeApi, FakeRecorder, reconcileWithGuard } from "@kvt/testing";
import { beforeEach, describe, expect, it } from "vitest";
import { BUNDLE_TARGET_TYPES, CertificateManager, RESYNC_MS, withCaBundle } from "./cert-manager.ts";
import type { ConfigMap, Secret } from "./cert-plan.ts";

const NS = "kubevirt";
const HOUR = 3_600_000;
const T0 = new Date("2026-12-01T00:00:00Z");
const KEY = objectKey(NS, "kubevirt-ca");

const b64 = (s: string): string => Buffer.from(s).toString("base64");
const unb64 = (s: string | undefined): string => Buffer.from(s ?? "", "base64").toString("utf8");

interface Harness {
  api: FakeApi;
  recorder: FakeRecorder;
  manager: CertificateManager;
  clock: { now: Date };
  config: { selfSigned?: KubeVirtSelfSignConfiguration };
  run(): Promise<number | undefined>;
  secret(name: string): Secret;
  pem(name: string): string;
  bundle(): string[];
}

function webhookObjects(): KubeObject[] {
  const hooks = (n: number) =>
    Array.from({ length: n }, (_, i) => ({ name: `h${i}.kubevirt.io`, clientConfig: { url: "https://x" } }));
  return [
    {
      apiVersion: "admissionregistration.k8s.io/v1",
      kind: "MutatingWebhookConfiguration",
      metadata: { name: "virt-api-mutator" },
      webhooks: hooks(2),
    } as KubeObject,
    {
      apiVersion: "admissionregistration.k8s.io/v1",
      kind: "ValidatingWebhookConfiguration",
      metadata: { name: "virt-api-validator" },
      webhooks: hooks(3),
    } as KubeObject,
    ...CA_BUNDLE_TARGETS.apiServices.map(
      (name) =>
        ({
          apiVersion: "apiregistration.k8s.io/v1",
          kind: "APIService",
          metadata: { name },
          spec: { group: "subresources.kubevirt.io", service: { namespace: NS, name: "virt-api" } },
        }) as KubeObject,
    ),
  ];
}

function harness(): Harness {
  const api = new FakeApi();
  const [m, v, ...services] = webhookObjects();
  api.seed(BUNDLE_TARGET_TYPES.mutatingWebhookConfigurations, m);
  api.seed(BUNDLE_TARGET_TYPES.validatingWebhookConfigurations, v);
  for (const s of services) api.seed(BUNDLE_TARGET_TYPES.apiServices, s);
  const recorder = new FakeRecorder();
  const clock = { now: T0 };
  const config: { selfSigned?: KubeVirtSelfSignConfiguration } = {};
  const manager = new CertificateManager({
    namespace: NS,
    secrets: api.client<Secret>(CORE_V1.secrets),
    configMaps: api.client<ConfigMap>(CORE_V1.configMaps),
    bundleTargets: {
      mutatingWebhookConfigurations: api.client(BUNDLE_TARGET_TYPES.mutatingWebhookConfigurations),
      validatingWebhookConfigurations: api.client(BUNDLE_TARGET_TYPES.validatingWebhookConfigurations),
      apiServices: api.client(BUNDLE_TARGET_TYPES.apiServices),
    },
    selfSigned: () => config.selfSigned,
    recorder,
    now: () => clock.now,
  });
  const secret = (name: string): Secret => {
    const s = api.stored<Secret>(CORE_V1.secrets, NS, name);
    if (!s) throw new Error(`no Secret ${name}`);
    return s;
  };
  return {
    api,
    recorder,
    manager,
    clock,
    config,
    run: async () => (await reconcileWithGuard(manager, KEY, [])).requeueAfterMs,
    secret,
    pem: (name) => unb64(secret(name).data?.["tls.crt"]),
    bundle: () =>
      splitCertificates(
        api.stored<ConfigMap>(CORE_V1.configMaps, NS, CERTIFICATES.caConfigMap)?.data?.["ca-bundle"] ?? "",
      ),
  };
}

const LEAVES = [CERTIFICATES.virtApi, CERTIFICATES.handlerServer, CERTIFICATES.handlerClient];
const at = (hours: number): Date => new Date(T0.getTime() + hours * HOUR);
const caBundles = (api: FakeApi): string[] => [
  ...api
    .all<KubeObject & { webhooks: { clientConfig: { caBundle?: string } }[] }>(
      BUNDLE_TARGET_TYPES.mutatingWebhookConfigurations,
    )
    .flatMap((o) => o.webhooks.map((h) => h.clientConfig.caBundle ?? "")),
  ...api
    .all<KubeObject & { webhooks: { clientConfig: { caBundle?: string } }[] }>(
      BUNDLE_TARGET_TYPES.validatingWebhookConfigurations,
    )
    .flatMap((o) => o.webhooks.map((h) => h.clientConfig.caBundle ?? "")),
  ...api
    .all<KubeObject & { spec: { caBundle?: string } }>(BUNDLE_TARGET_TYPES.apiServices)
    .map((o) => o.spec.caBundle ?? ""),
];

describe("CertificateManager on a fresh install", () => {
  let h: Harness;
  beforeEach(async () => {
    h = harness();
    await h.run();
  });

  it("creates the CA, the bundle and KubeVirt's three component Secrets, in virt-operator's order", () => {
    expect(h.api.summary()).toEqual([
      "create secrets",
      "create configmaps",
      "update mutatingwebhookconfigurations virt-api-mutator",
      "update validatingwebhookconfigurations virt-api-validator",
      "update apiservices v1.subresources.kubevirt.io",
      "update apiservices v1alpha3.subresources.kubevirt.io",
      "create secrets",
      "create secrets",
      "create secrets",
    ]);
    const names = h.api.all<Secret>(CORE_V1.secrets).map((s) => s.metadata?.name);
    expect(names).toEqual([CERTIFICATES.caSecret, ...LEAVES]);
  });

  it("stores each as kubernetes.io/tls with tls.crt, tls.key and the kubevirt.io/duration annotation", () => {
    const ca = h.secret(CERTIFICATES.caSecret);
    expect(ca.type).toBe("kubernetes.io/tls");
    expect(Object.keys(ca.data ?? {})).toEqual(["tls.crt", "tls.key"]);
    expect(ca.metadata?.annotations?.["kubevirt.io/duration"]).toBe("168h0m0s");
    expect(ca.metadata?.labels?.["app.kubernetes.io/managed-by"]).toBe("virt-operator");
    expect(new X509Certificate(h.pem(CERTIFICATES.caSecret)).subject).toBe(`CN=kubevirt.io@${T0.getTime() / 1000}`);
    for (const leaf of LEAVES) {
      expect(h.secret(leaf).metadata?.annotations?.["kubevirt.io/duration"]).toBe("24h0m0s");
      expect(isIssuedBy(h.pem(leaf), h.pem(CERTIFICATES.caSecret))).toBe(true);
      expect(certificateInfo(h.pem(leaf)).notAfter).toEqual(at(24));
    }
    expect(certificateInfo(h.pem(CERTIFICATES.caSecret)).notAfter).toEqual(at(168));
  });

  it("gives each component KubeVirt's subject, names and purpose", () => {
    const api = new X509Certificate(h.pem(CERTIFICATES.virtApi));
    expect(api.subject).toBe("CN=virt-api.kubevirt.pod.cluster.local");
    expect(api.subjectAltName).toBe(
      "DNS:virt-api, DNS:virt-api.kubevirt, DNS:virt-api.kubevirt.svc, DNS:virt-api.kubevirt.svc.cluster.local",
    );
    expect(certificateInfo(h.pem(CERTIFICATES.virtApi)).extendedKeyUsage).toEqual(["1.3.6.1.5.5.7.3.1"]);
    expect(new X509Certificate(h.pem(CERTIFICATES.handlerServer)).subject).toBe(
      "CN=kubevirt.io:system:node:virt-handler",
    );
    // Also the handlers' client certificate towards each other (the migration secret).
    expect(certificateInfo(h.pem(CERTIFICATES.handlerServer)).extendedKeyUsage).toEqual([
      "1.3.6.1.5.5.7.3.1",
      "1.3.6.1.5.5.7.3.2",
    ]);
    expect(new X509Certificate(h.pem(CERTIFICATES.handlerClient)).subject).toBe(
      "CN=kubevirt.io:system:client:virt-handler",
    );
    expect(certificateInfo(h.pem(CERTIFICATES.handlerClient)).extendedKeyUsage).toEqual(["1.3.6.1.5.5.7.3.2"]);
  });

  it("writes the CA to the kubevirt-ca ConfigMap and into every webhook's and APIService's caBundle", () => {
    expect(h.bundle()).toEqual([`${h.pem(CERTIFICATES.caSecret).trim()}\n`]);
    const expected = b64(h.bundle().join(""));
    expect(caBundles(h.api)).toEqual(Array(7).fill(expected));
  });

  it("changes nothing on the next pass, and comes back within the resync period", async () => {
    const before = h.api.writes().length;
    expect(await h.run()).toBe(RESYNC_MS);
    expect(h.api.writes()).toHaveLength(before);
    expect(h.recorder.reasons().filter((r) => r === "CertificateIssued")).toHaveLength(4);
  });
});

describe("CertificateManager rotation (fake clock)", () => {
  it("renews each component certificate renewBefore ahead of its expiry, and only then", async () => {
    const h = harness();
    await h.run();
    const first = h.pem(CERTIFICATES.virtApi);
    // Default server duration 24h, renewBefore 20% of it: 4h48m, so due at 19h12m.
    h.clock.now = at(19.19);
    await h.run();
    expect(h.pem(CERTIFICATES.virtApi)).toBe(first);
    h.clock.now = at(19.21);
    const writes = h.api.writes().length;
    await h.run();
    expect(h.api.summary().slice(writes)).toEqual([
      `update secrets ${NS}/${CERTIFICATES.virtApi}`,
      `update secrets ${NS}/${CERTIFICATES.handlerServer}`,
      `update secrets ${NS}/${CERTIFICATES.handlerClient}`,
    ]);
    expect(h.pem(CERTIFICATES.virtApi)).not.toBe(first);
    expect(certificateInfo(h.pem(CERTIFICATES.virtApi)).notAfter).toEqual(at(19.21 + 24));
    expect(h.recorder.events.at(-1)).toMatch(/^Normal CertificateIssued .*\(Expiring: due since/);
  });

  it("comes back at the next deadline when it is sooner than the resync", async () => {
    const h = harness();
    h.config.selfSigned = { server: { duration: "10s", renewBefore: "3s" } };
    expect(await h.run()).toBe(7000);
  });

  it("renews every certificate when the KubeVirt CR changes a duration", async () => {
    const h = harness();
    await h.run();
    h.config.selfSigned = { server: { duration: "2h" } };
    const writes = h.api.writes().length;
    await h.run();
    expect(h.api.summary().slice(writes)).toHaveLength(3);
    expect(h.secret(CERTIFICATES.virtApi).metadata?.annotations?.["kubevirt.io/duration"]).toBe("2h0m0s");
    expect(certificateInfo(h.pem(CERTIFICATES.handlerClient)).notAfter).toEqual(at(2));
  });

  it("rotates the CA: the bundle keeps the old CA for the overlap while certificates move to the new one", async () => {
    const h = harness();
    h.config.selfSigned = { ca: { duration: "10h", renewBefore: "2h" }, server: { duration: "24h" } };
    await h.run();
    const oldCa = h.pem(CERTIFICATES.caSecret);
    const oldLeaf = h.pem(CERTIFICATES.handlerServer);
    // A leaf would outlive its CA: it is renewed half way into the CA's overlap (10h - 1h).
    h.clock.now = at(7.9);
    await h.run();
    expect(h.pem(CERTIFICATES.caSecret)).toBe(oldCa);
    h.clock.now = at(8.1);
    const requeue = await h.run();
    const newCa = h.pem(CERTIFICATES.caSecret);
    expect(newCa).not.toBe(oldCa);
    // New CA first, old one still trusted, so certificates it signed and not yet reloaded keep working.
    expect(h.bundle()).toEqual([`${newCa.trim()}\n`, `${oldCa.trim()}\n`]);
    expect(isIssuedBy(oldLeaf, h.bundle()[1] ?? "")).toBe(true);
    expect(caBundles(h.api)).toEqual(Array(7).fill(b64(h.bundle().join(""))));
    for (const leaf of LEAVES) expect(isIssuedBy(h.pem(leaf), newCa)).toBe(true);
    expect(h.recorder.events.filter((e) => e.includes("CaRotated"))).toHaveLength(3);
    expect(requeue).toBe(RESYNC_MS);
    // Within the overlap nothing changes; after it, the old CA leaves the bundle and the caBundles.
    h.clock.now = at(9.9);
    await h.run();
    expect(h.bundle()).toHaveLength(2);
    h.clock.now = at(10.2);
    await h.run();
    expect(h.bundle()).toEqual([`${newCa.trim()}\n`]);
    expect(caBundles(h.api)).toEqual(Array(7).fill(b64(`${newCa.trim()}\n`)));
  });
});

describe("CertificateManager and damaged objects", () => {
  it.each([
    [
      "garbage in tls.crt",
      { "tls.crt": b64("garbage"), "tls.key": b64("more garbage") },
      "is not a PEM X.509 certificate",
    ],
    ["no tls.key", { "tls.crt": b64("x") }, "tls.key value not found"],
  ])("replaces a Secret with %s, with a Warning event, and keeps its type", async (_what, data, detail) => {
    const h = harness();
    await h.run();
    h.api.seed(CORE_V1.secrets, {
      ...h.secret(CERTIFICATES.virtApi),
      type: "Opaque",
      data,
    });
    await h.run();
    expect(certificateInfo(h.pem(CERTIFICATES.virtApi)).subject).toBe("CN=virt-api.kubevirt.pod.cluster.local");
    expect(h.secret(CERTIFICATES.virtApi).type).toBe("Opaque");
    const warning = h.recorder.events.find((e) => e.startsWith("Warning"));
    expect(warning).toContain(`Warning InvalidCertificate Secret ${CERTIFICATES.virtApi} holds no usable certificate`);
    expect(warning).toContain(detail);
    expect(h.recorder.objects.at(-1)?.kind).toBe("Secret");
  });

  it("replaces a key that does not belong to the certificate, and a CA Secret that holds no CA", async () => {
    const h = harness();
    await h.run();
    const api = h.secret(CERTIFICATES.virtApi);
    const other = h.secret(CERTIFICATES.handlerServer);
    h.api.seed(CORE_V1.secrets, { ...api, data: { ...api.data, "tls.key": other.data?.["tls.key"] ?? "" } });
    h.api.seed(CORE_V1.secrets, { ...h.secret(CERTIFICATES.caSecret), data: other.data });
    await h.run();
    expect(h.recorder.events.filter((e) => e.startsWith("Warning"))).toEqual([
      expect.stringContaining(`Secret ${CERTIFICATES.caSecret} holds no usable certificate (tls.crt is not a CA`),
      expect.stringContaining(`Secret ${CERTIFICATES.virtApi} holds no usable certificate (tls.key is not the private`),
    ]);
    // The new CA re-signed every component certificate, the damaged one included.
    for (const leaf of LEAVES) expect(isIssuedBy(h.pem(leaf), h.pem(CERTIFICATES.caSecret))).toBe(true);
  });

  it("replaces a CA bundle that is not PEM certificates, and puts back a caBundle someone reset", async () => {
    const h = harness();
    await h.run();
    const cm = h.api.stored<ConfigMap>(CORE_V1.configMaps, NS, CERTIFICATES.caConfigMap) as ConfigMap;
    h.api.seed(CORE_V1.configMaps, { ...cm, data: { "ca-bundle": "not a bundle" } });
    const svc = h.api.stored<KubeObject & { spec: Record<string, unknown> }>(
      BUNDLE_TARGET_TYPES.apiServices,
      undefined,
      "v1.subresources.kubevirt.io",
    );
    h.api.seed(BUNDLE_TARGET_TYPES.apiServices, { ...svc, spec: { ...svc?.spec, caBundle: "" } } as KubeObject);
    await h.run();
    expect(h.bundle()).toEqual([`${h.pem(CERTIFICATES.caSecret).trim()}\n`]);
    expect(caBundles(h.api)).toEqual(Array(7).fill(b64(h.bundle().join(""))));
  });

  it("reissues a handler certificate made for server use only (before it was also the handlers' client)", async () => {
    const h = harness();
    await h.run();
    const serverOnly = h.secret(CERTIFICATES.virtApi); // the same CA, serverAuth only
    h.api.seed(CORE_V1.secrets, { ...h.secret(CERTIFICATES.handlerServer), data: serverOnly.data });
    await h.run();
    expect(certificateInfo(h.pem(CERTIFICATES.handlerServer)).extendedKeyUsage).toContain("1.3.6.1.5.5.7.3.2");
    expect(h.recorder.events.filter((e) => e.includes("UsageChanged"))).toEqual([
      expect.stringContaining(
        `Secret ${CERTIFICATES.handlerServer}, valid until 2026-12-02T00:00:00.000Z (UsageChanged: issued without extended key usage 1.3.6.1.5.5.7.3.2)`,
      ),
    ]);
  });

  it("puts back a deleted component Secret signed by the same CA", async () => {
    const h = harness();
    await h.run();
    const ca = h.pem(CERTIFICATES.caSecret);
    await h.api.client(CORE_V1.secrets).delete(NS, CERTIFICATES.handlerClient);
    await h.run();
    expect(isIssuedBy(h.pem(CERTIFICATES.handlerClient), ca)).toBe(true);
    expect(h.pem(CERTIFICATES.caSecret)).toBe(ca);
  });

  it("skips a webhook configuration that does not exist yet, and fails the pass on an API error", async () => {
    const h = harness();
    await h.api.client(BUNDLE_TARGET_TYPES.validatingWebhookConfigurations).delete("", "virt-api-validator");
    await h.run();
    expect(h.api.all(CORE_V1.secrets)).toHaveLength(4);
    const h2 = harness();
    h2.api.failOn("create", "configmaps", new Error("boom"));
    await expect(h2.run()).rejects.toThrow("boom");
  });
});

describe("withCaBundle()", () => {
  it("sets every webhook's caBundle or the APIService's, and says when nothing changes", () => {
    const [m, , svc] = webhookObjects();
    const set = withCaBundle(m, "QUJD") as KubeObject & { webhooks: { clientConfig: object }[] };
    expect(set.webhooks.map((w) => w.clientConfig)).toEqual([
      { url: "https://x", caBundle: "QUJD" },
      { url: "https://x", caBundle: "QUJD" },
    ]);
    expect(withCaBundle(set, "QUJD")).toBeUndefined();
    expect((withCaBundle(svc, "QUJD") as { spec: { caBundle: string } }).spec.caBundle).toBe("QUJD");
  });
});
