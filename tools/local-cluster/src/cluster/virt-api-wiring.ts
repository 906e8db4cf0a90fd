/**
 * How the local cluster wires virt-api: the front proxy's certificates (pki.ts, kept under the data dir), and the
 * MutatingWebhookConfiguration, ValidatingWebhookConfiguration and APIService objects that point the API server at
 * it: deploy/'s objects (Service virt-api in the install namespace), with the address where that Service answers
 * here (virt-api on 127.0.0.1:<port>) in an annotation, created or replaced at every start, since the port may
 * change. Their caBundle is virt-controller's to set (its certificate manager), so a replace keeps the one there.
 */
import { join } from "node:path";
import { KUBEVIRT_CR } from "@kvt/api";
import { isNotFound, type KubeObject, ResourceDiscovery, type RestTransport, resourceClient } from "@kvt/kube";
import { apiServices, mutatingWebhookConfiguration, validatingWebhookConfiguration } from "@kvt/virt-api/lib";
import { ensureCa, ensureLeaf } from "./pki.ts";

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

type Wired = KubeObject & { webhooks?: { name?: string; clientConfig?: { caBundle?: string } }[] } & {
  spec?: { caBundle?: string };
};

/** `desired` with the caBundles `current` carries (each webhook's by name, or the APIService's). */
export function keepCaBundles(desired: Wired, current: Wired | undefined): Wired {
  const out = structuredClone(desired);
  for (const hook of out.webhooks ?? []) {
    const caBundle = current?.webhooks?.find((h) => h.name === hook.name)?.clientConfig?.caBundle;
    if (caBundle) hook.clientConfig = { ...hook.clientConfig, caBundle };
  }
  if (out.spec && current?.spec?.caBundle) out.spec.caBundle = current.spec.caBundle;
  return out;
}

/**
 * Creates or replaces the webhook configurations and APIServices routing to virt-api, which answers for Service
 * `kubevirt/virt-api` on 127.0.0.1:`port`; an existing object keeps its caBundle.
 */
export async function registerVirtApi(transport: RestTransport, port: number): Promise<void> {
  const endpoint = { namespace: KUBEVIRT_CR.namespace, serviceUrl: `https://127.0.0.1:${port}` };
  const objects = [
    mutatingWebhookConfiguration(endpoint),
    validatingWebhookConfiguration(endpoint),
    ...apiServices(endpoint),
  ] as Wired[];
  const discovery = new ResourceDiscovery(transport);
  for (const obj of objects) {
    const client = resourceClient<Wired>(transport, await discovery.resourceType(obj.apiVersion ?? "", obj.kind ?? ""));
    const name = obj.metadata?.name ?? "";
    const current = await client.get("", name).catch((error: unknown) => {
      if (isNotFound(error)) return undefined;
      throw error;
    });
    if (!current) {
      await client.create(obj);
      continue;
    }
    const replaced = keepCaBundles(obj, current);
    await client.update({
      ...replaced,
      metadata: { ...replaced.metadata, resourceVersion: current.metadata?.resourceVersion },
    });
  }
}
