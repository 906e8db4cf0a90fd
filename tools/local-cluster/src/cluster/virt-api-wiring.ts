/**
 * How the local cluster wires virt-api: its CA and serving certificate (made once, kept under the data dir), and
 * the MutatingWebhookConfiguration, ValidatingWebhookConfiguration and APIService objects that point the API
 * server at it (created or replaced at every start, since the port or CA may change).
 */
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CustomObjectsApi, type KubeConfig } from "@kubernetes/client-node";
import {
  apiServices,
  generateCa,
  issueCertificate,
  mutatingWebhookConfiguration,
  validatingWebhookConfiguration,
} from "@kvt/virt-api/lib";
import type { TlsFiles } from "./local-cluster.ts";

/** Creates virt-api's CA and serving certificate for 127.0.0.1/localhost in `dir`, unless they exist. */
export function ensureVirtApiTls(dir: string): TlsFiles {
  const files = { cert: join(dir, "virt-api.crt"), key: join(dir, "virt-api.key"), ca: join(dir, "ca.crt") };
  if (!existsSync(files.cert) || !existsSync(files.key) || !existsSync(files.ca)) {
    const ca = generateCa("kubevirt-ts-local-ca");
    const serving = issueCertificate(ca, {
      commonName: "virt-api.kubevirt.svc",
      dnsNames: ["virt-api.kubevirt.svc", "localhost"],
      ipAddresses: ["127.0.0.1"],
    });
    writeFileSync(files.ca, ca.certPem);
    writeFileSync(files.cert, serving.certPem);
    writeFileSync(files.key, serving.keyPem, { mode: 0o600 });
  }
  return files;
}

/** Creates or replaces the webhook configurations and APIServices routing to virt-api on 127.0.0.1:`port`. */
export async function registerVirtApi(kubeConfig: KubeConfig, port: number, caPem: string): Promise<void> {
  const endpoint = { url: `https://127.0.0.1:${port}`, caPem };
  const objects = [
    mutatingWebhookConfiguration(endpoint),
    validatingWebhookConfiguration(endpoint),
    ...apiServices(endpoint),
  ];
  const api = kubeConfig.makeApiClient(CustomObjectsApi);
  for (const obj of objects as { apiVersion: string; kind: string; metadata: { name: string } }[]) {
    const [group, version] = obj.apiVersion.split("/");
    const ref = { group, version, plural: `${obj.kind.toLowerCase()}s` };
    try {
      await api.createClusterCustomObject({ ...ref, body: obj });
    } catch (err) {
      if ((err as { code?: number }).code !== 409) throw err;
      const current = (await api.getClusterCustomObject({ ...ref, name: obj.metadata.name })) as {
        metadata: { resourceVersion: string };
      };
      await api.replaceClusterCustomObject({
        ...ref,
        name: obj.metadata.name,
        body: { ...obj, metadata: { ...obj.metadata, resourceVersion: current.metadata.resourceVersion } },
      });
    }
  }
}
