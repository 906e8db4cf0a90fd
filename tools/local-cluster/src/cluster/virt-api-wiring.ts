/**
 * How the local cluster wires virt-api: its serving certificate (pki.ts, kept under the data dir), and
 * the MutatingWebhookConfiguration, ValidatingWebhookConfiguration and APIService objects that point the API
 * server at it (created or replaced at every start, since the port or CA may change).
 */
import { join } from "node:path";
import type { RestTransport } from "@kvt/kube";
import { apiServices, mutatingWebhookConfiguration, validatingWebhookConfiguration } from "@kvt/virt-api/lib";
import { createOrReplaceAll } from "./create-or-replace.ts";
import type { TlsFiles } from "./local-cluster.ts";
import { ensureCa, ensureLeaf, ensureVirtApiCerts } from "./pki.ts";

/** Creates virt-api's serving certificate from the KubeVirt CA in `dir` (pki.ts), unless it exists. */
export async function ensureVirtApiTls(dir: string): Promise<TlsFiles> {
  return await ensureVirtApiCerts(dir);
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
export async function ensureFrontProxyTls(dir: string): Promise<FrontProxyFiles> {
  const ca = await ensureCa(dir, "front-proxy-ca");
  const client = await ensureLeaf(dir, "front-proxy-client", ca, {
    commonName: FRONT_PROXY_CLIENT_NAME,
    usage: "client",
  });
  return { ca: join(dir, "front-proxy-ca.crt"), clientCert: client.cert, clientKey: client.key };
}

/** Creates or replaces the webhook configurations and APIServices routing to virt-api on 127.0.0.1:`port`. */
export async function registerVirtApi(transport: RestTransport, port: number, caPem: string): Promise<void> {
  const endpoint = { url: `https://127.0.0.1:${port}`, caPem };
  const objects = [
    mutatingWebhookConfiguration(endpoint),
    validatingWebhookConfiguration(endpoint),
    ...apiServices(endpoint),
  ];
  await createOrReplaceAll(transport, objects);
}
