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

/** The front-proxy PKI: the requestheader client CA virt-api trusts and the client certificate the API server presents. */
export interface FrontProxyFiles {
  /** CA that signed the client certificate (virt-api `--requestheader-client-ca`). */
  readonly ca: string;
  /** Client certificate (CN `front-proxy-client`) and key (API server `--proxy-client-cert/--proxy-client-key`). */
  readonly clientCert: string;
  readonly clientKey: string;
}

/** The CN virt-api allows for the front-proxy client certificate (`--requestheader-allowed-names`). */
export const FRONT_PROXY_CLIENT_NAME = "front-proxy-client";

/**
 * Creates the front-proxy CA and the API server's front-proxy client certificate in `dir`, unless they exist (as
 * kubeadm's front-proxy-ca.crt / front-proxy-client.crt): the API server proxies APIService requests with it, and
 * virt-api then trusts the X-Remote-User/X-Remote-Group identity headers.
 */
export function ensureFrontProxyTls(dir: string): FrontProxyFiles {
  const files = {
    ca: join(dir, "front-proxy-ca.crt"),
    clientCert: join(dir, "front-proxy-client.crt"),
    clientKey: join(dir, "front-proxy-client.key"),
  };
  if (!existsSync(files.ca) || !existsSync(files.clientCert) || !existsSync(files.clientKey)) {
    const ca = generateCa("kubevirt-ts-front-proxy-ca");
    const client = issueCertificate(ca, { commonName: FRONT_PROXY_CLIENT_NAME, usage: "client" });
    writeFileSync(files.ca, ca.certPem);
    writeFileSync(files.clientCert, client.certPem);
    writeFileSync(files.clientKey, client.keyPem, { mode: 0o600 });
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
