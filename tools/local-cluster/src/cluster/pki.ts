/**
 * The local cluster's certificates, made once under `<data-dir>/pki` (directory 0700, keys 0600) by the one
 * certificate module (@kvt/certs), renewed when a fifth of their life is left, with KubeVirt's and kubeadm's names:
 *
 *   kubevirt-ca ----------+--> virt-api            serving (webhooks, APIService)   Secret kubevirt-virt-api-certs
 *    (Secret kubevirt-ca) +--> virt-handler-server  serving, port 8186              kubevirt-virt-handler-server-certs
 *                         +--> virt-handler-client  client CN kubevirt.io:system:client:virt-handler, presented by
 *                                                   virt-api to the handlers         kubevirt-virt-handler-certs
 *   kubelet-ca -----------+--> kubelet-<node>       each process-kubelet's serving certificate (log port)
 *    (--client-ca-file)   +--> apiserver-kubelet-client   the API server's client certificate for pods/log
 *   front-proxy-ca -------+--> front-proxy-client   (virt-api-wiring.ts)
 */
import { readFileSync } from "node:fs";
import { request as httpsRequest } from "node:https";
import { join } from "node:path";
import {
  type CertificateAndKey,
  type CertificateFiles,
  certificateFiles,
  ensureCertificate,
  generateCa,
  isIssuedBy,
  issueCertificate,
  readCertificate,
  writeCertificate,
} from "@kvt/certs";

/** The CN virt-handler requires of a client certificate (KubeVirt's virt-handler client identity). */
export const HANDLER_CLIENT_CN = "kubevirt.io:system:client:virt-handler";
/** The CN of virt-handler's serving certificate (KubeVirt's). */
export const HANDLER_SERVER_CN = "kubevirt.io:system:node:virt-handler";
/** The API server's kubelet client identity (kubeadm's apiserver-kubelet-client). */
export const KUBELET_CLIENT_CN = "kube-apiserver-kubelet-client";

/** virt-handler's TLS: its serving certificate, virt-api's client certificate, and the CA of both. */
export interface HandlerTlsFiles {
  readonly ca: string;
  readonly server: CertificateFiles;
  readonly client: CertificateFiles;
}

/** The process-kubelets' TLS: each node's serving certificate, the API server's client certificate, their CA. */
export interface KubeletTlsFiles {
  readonly ca: string;
  readonly serving: Readonly<Record<string, CertificateFiles>>;
  readonly client: CertificateFiles;
}

const LOCAL_NAMES = { dnsNames: ["localhost"], ipAddresses: ["127.0.0.1"] };

/** The CA `<dir>/<name>.{crt,key}`, made once (10 years). */
export async function ensureCa(dir: string, name: string): Promise<CertificateAndKey> {
  const files = await ensureCertificate(dir, name, () => generateCa(name));
  const ca = readCertificate(files);
  if (!ca) throw new Error(`CA ${name} vanished from ${dir}`);
  return ca;
}

/** The leaf `<dir>/<name>.{crt,key}` issued by `ca`, remade when missing, due, or issued by another CA. */
export async function ensureLeaf(
  dir: string,
  name: string,
  ca: CertificateAndKey,
  request: Parameters<typeof issueCertificate>[1],
): Promise<CertificateFiles> {
  const current = readCertificate(certificateFiles(dir, name));
  const make = (): Promise<CertificateAndKey> => issueCertificate(ca, request);
  if (current && !isIssuedBy(current.certPem, ca.certPem)) {
    // An older data directory's certificate from another CA: replace it rather than serve an untrusted chain.
    return writeCertificate(dir, name, await make());
  }
  return await ensureCertificate(dir, name, make);
}

/** virt-api's serving certificate from the KubeVirt CA (`kubevirt-ca`). */
export async function ensureVirtApiCerts(dir: string): Promise<{ cert: string; key: string; ca: string }> {
  const ca = await ensureCa(dir, "kubevirt-ca");
  const files = await ensureLeaf(dir, "virt-api", ca, {
    commonName: "virt-api.kubevirt.svc",
    dnsNames: ["virt-api.kubevirt.svc", "localhost"],
    ipAddresses: ["127.0.0.1"],
  });
  return { ...files, ca: join(dir, "kubevirt-ca.crt") };
}

/** virt-handler's serving certificate and virt-api's client certificate for it, from the KubeVirt CA. */
export async function ensureHandlerCerts(dir: string): Promise<HandlerTlsFiles> {
  const ca = await ensureCa(dir, "kubevirt-ca");
  const server = await ensureLeaf(dir, "virt-handler-server", ca, { commonName: HANDLER_SERVER_CN, ...LOCAL_NAMES });
  const client = await ensureLeaf(dir, "virt-handler-client", ca, { commonName: HANDLER_CLIENT_CN, usage: "client" });
  return { ca: join(dir, "kubevirt-ca.crt"), server, client };
}

/** Each node's kubelet serving certificate and the API server's kubelet client certificate, from `kubelet-ca`. */
export async function ensureKubeletCerts(dir: string, nodes: readonly string[]): Promise<KubeletTlsFiles> {
  const ca = await ensureCa(dir, "kubelet-ca");
  const serving: Record<string, CertificateFiles> = {};
  for (const node of nodes) {
    serving[node] = await ensureLeaf(dir, `kubelet-${node}`, ca, { commonName: `system:node:${node}`, ...LOCAL_NAMES });
  }
  const client = await ensureLeaf(dir, "apiserver-kubelet-client", ca, {
    commonName: KUBELET_CLIENT_CN,
    organization: "kubeadm:cluster-admins",
    usage: "client",
  });
  return { ca: join(dir, "kubelet-ca.crt"), serving, client };
}

/** virt-handler's flags: mutual TLS on 127.0.0.1 (the local cluster's nodes share this host's loopback). */
export function handlerServerFlags(tls: HandlerTlsFiles): string[] {
  return ["--host", "127.0.0.1", "--tls-cert", tls.server.cert, "--tls-key", tls.server.key, "--client-ca", tls.ca];
}

/** virt-api's flags for calling the handlers: the KubeVirt CA and virt-api's client certificate. */
export function virtApiHandlerFlags(tls: HandlerTlsFiles): string[] {
  return ["--handler-ca", tls.ca, "--handler-client-cert", tls.client.cert, "--handler-client-key", tls.client.key];
}

/** A process-kubelet's serving flags, named as the kubelet's (`--client-ca-file` is the API server's client CA). */
export function kubeletServerFlags(tls: KubeletTlsFiles, node: string): string[] {
  const serving = tls.serving[node];
  if (!serving) throw new Error(`no kubelet serving certificate for node ${node}`);
  return ["--tls-cert-file", serving.cert, "--tls-private-key-file", serving.key, "--client-ca-file", tls.ca];
}

/** The API server's flags for reaching kubelets, named as kube-apiserver's. */
export function apiserverKubeletFlags(tls: KubeletTlsFiles): string[] {
  return [
    "--kubelet-client-certificate",
    tls.client.cert,
    "--kubelet-client-key",
    tls.client.key,
    "--kubelet-certificate-authority",
    tls.ca,
  ];
}

/** Whether the handler on 127.0.0.1:`port` answers /healthz to virt-api's client certificate. */
export async function handlerServes(port: number, tls: HandlerTlsFiles): Promise<boolean> {
  const [ca, cert, key] = [tls.ca, tls.client.cert, tls.client.key].map((f) => readFileSync(f, "utf8"));
  return await new Promise<boolean>((resolve) => {
    const req = httpsRequest({ host: "127.0.0.1", port, path: "/healthz", ca, cert, key, timeout: 2000 }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on("timeout", () => req.destroy());
    req.on("error", () => resolve(false));
    req.end();
  });
}
