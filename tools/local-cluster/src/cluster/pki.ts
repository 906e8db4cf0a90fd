/**
 * The cluster's own certificates (not KubeVirt's), made once under `<data-dir>/pki` (directory 0700, keys 0600)
 * by the one certificate module (@kvt/certs), renewed when a fifth of their life is left, with kubeadm's names:
 *
 *   kubelet-ca -----------+--> kubelet-<node>       each process-kubelet's serving certificate (log port)
 *    (--client-ca-file)   +--> apiserver-kubelet-client   the API server's client certificate for pods/log
 *   front-proxy-ca -------+--> front-proxy-client   (virt-api-wiring.ts)
 *
 * KubeVirt's certificates (the KubeVirt CA, virt-api's and virt-handler's) are virt-controller's to make and renew,
 * in Secrets, as on any cluster; component-volumes.ts writes them where the components read them.
 */
import { readFileSync } from "node:fs";
import { request as httpsRequest } from "node:https";
import { join } from "node:path";
import type { PeerCertificate } from "node:tls";
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

/** The API server's kubelet client identity (kubeadm's apiserver-kubelet-client). */
export const KUBELET_CLIENT_CN = "kube-apiserver-kubelet-client";

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

/** virt-api's client certificate for the handlers (files) and the CA bundle that signed theirs (PEM). */
export interface HandlerClientTls {
  readonly caPem: string;
  readonly certFile: string;
  readonly keyFile: string;
}

/** The CN of virt-handler's serving certificate, which virt-api checks (KubeVirt's; its SANs name the Service). */
const HANDLER_SERVER_CN = "kubevirt.io:system:node:virt-handler";

/**
 * Resolves true when the handler on 127.0.0.1:`port` answers /healthz to virt-api's client certificate, as virt-api
 * calls it; rejects with the reason otherwise (refused, TLS, a status, no answer).
 */
export async function handlerServes(port: number, tls: HandlerClientTls): Promise<boolean> {
  const [ca, cert, key] = [tls.caPem, readFileSync(tls.certFile, "utf8"), readFileSync(tls.keyFile, "utf8")];
  const checkServerIdentity = (_host: string, peer: PeerCertificate): Error | undefined =>
    peer.subject?.CN === HANDLER_SERVER_CN
      ? undefined
      : new Error(`virt-handler's certificate is for ${String(peer.subject?.CN)}`);
  const options = { host: "127.0.0.1", port, path: "/healthz", ca, cert, key, timeout: 2000, checkServerIdentity };
  // Rejects with the reason (refused, TLS, status), so a wait that times out says why the handler did not serve.
  return await new Promise<boolean>((resolve, reject) => {
    const req = httpsRequest(options, (res) => {
      res.resume();
      if (res.statusCode === 200) resolve(true);
      else reject(new Error(`virt-handler's /healthz on port ${port} answered ${res.statusCode}`));
    });
    req.on("timeout", () => req.destroy(new Error(`virt-handler's /healthz on port ${port} did not answer in 2 s`)));
    req.on("error", (e) => reject(new Error(`virt-handler on port ${port}: ${e.message}`)));
    req.end();
  });
}
