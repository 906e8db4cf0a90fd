import { X509Certificate } from "node:crypto";
import { describe, expect, it } from "vitest";
import { CERT_OBJECT_NAMES, certificateObjects, HANDLER_NAMES } from "./certificates.ts";

describe("certificateObjects()", () => {
  it("makes KubeVirt's Secrets and ConfigMap, chained to one CA, and fills every caBundle with it", async () => {
    const objects = await certificateObjects("kv-test", "9.9.9");
    const byKindName = (kind: string, name: string): Record<string, unknown> | undefined =>
      objects.find((o) => o.kind === kind && o.metadata.name === name);
    const cert = (name: string): X509Certificate => {
      const s = byKindName("Secret", name) as { type: string; stringData: Record<string, string> } | undefined;
      expect(s?.type, name).toBe("kubernetes.io/tls");
      expect(s?.stringData["tls.key"], name).toContain("PRIVATE KEY");
      return new X509Certificate(s?.stringData["tls.crt"] ?? "");
    };
    const caPem = (byKindName("ConfigMap", CERT_OBJECT_NAMES.ca) as { data: Record<string, string> }).data["ca-bundle"];
    const ca = new X509Certificate(caPem ?? "");
    expect(ca.ca).toBe(true);
    expect(cert(CERT_OBJECT_NAMES.ca).fingerprint256).toBe(ca.fingerprint256);
    const virtApi = cert(CERT_OBJECT_NAMES.virtApi);
    expect(virtApi.subjectAltName).toContain("DNS:virt-api.kv-test.svc");
    const server = cert(CERT_OBJECT_NAMES.handlerServer);
    const client = cert(CERT_OBJECT_NAMES.handlerClient);
    expect(server.subject).toBe(`CN=${HANDLER_NAMES.server}`);
    expect(client.subject).toBe(`CN=${HANDLER_NAMES.client}`);
    expect(client.keyUsage).toEqual(["1.3.6.1.5.5.7.3.2"]);
    for (const c of [virtApi, server, client]) expect(c.verify(ca.publicKey)).toBe(true);
    for (const o of objects) expect(o.metadata.namespace ?? "kv-test").toBe("kv-test");
    const bundles = objects.flatMap((o) => {
      const spec = o.spec as { caBundle?: string } | undefined;
      const hooks = (o.webhooks as { clientConfig: { caBundle?: string } }[] | undefined) ?? [];
      return [spec?.caBundle, ...hooks.map((h) => h.clientConfig.caBundle)].filter((b) => b !== undefined);
    });
    expect(bundles.length).toBeGreaterThanOrEqual(4);
    for (const b of bundles) expect(Buffer.from(b, "base64").toString()).toBe(caPem);
  });
});
