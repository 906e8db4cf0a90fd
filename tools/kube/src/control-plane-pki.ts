/**
 * The real control plane's certificates and keys, made once under `<cluster-dir>/pki` by the platform's one
 * certificate module (through local-cluster's ensureCa/ensureLeaf: remade when missing, due, or from another CA),
 * with kubeadm's names and identities:
 *
 *   ca -------------+--> apiserver                      serving: localhost, 127.0.0.1, the bridge address, kubernetes..., 10.96.0.1
 *                   +--> apiserver-kubelet-client       O=system:masters (kubelet API)
 *                   +--> admin                          CN=kubernetes-admin, O=system:masters (the printed kubeconfig)
 *                   +--> controller-manager             CN=system:kube-controller-manager
 *                   +--> scheduler                      CN=system:kube-scheduler
 *                   +--> controller-manager-server,     the two components' serving certificates (localhost,
 *                        scheduler-server               127.0.0.1), so `status` verifies whom it probes
 *                   +--> kubelet-<node>-client          CN=system:node:<node>, O=system:nodes (Node authorizer)
 *                   +--> kube-proxy                     CN=system:kube-proxy (bound to system:node-proxier)
 *                   +--> kubelet-<node>-server          the kubelet's serving certificate (the node's address);
 *                                                       the API server verifies it (--kubelet-certificate-authority)
 *                   +--> registry-server                the registry's serving certificate (the bridge address)
 *                   +--> registry-client                what pushes (skopeo) and pulls (the nodes' containerd) present;
 *                                                       the registry accepts only clients of this CA
 *   front-proxy-ca -+--> front-proxy-client             aggregation (--proxy-client-cert-file)
 *   etcd-ca --------+--> etcd-server                    etcd's serving and peer certificate
 *                   +--> apiserver-etcd-client          the API server's etcd identity
 *                   +--> etcd-healthcheck-client        `status`'s probe of etcd /health
 *   sa.key / sa.pub                                     service-account token signing (ECDSA P-256, ES256)
 *
 * The controller manager signs CSRs with `ca` (--cluster-signing-*), as kubeadm configures it.
 */
import { generateKeyPairSync, X509Certificate } from "node:crypto";
import { chmodSync, copyFileSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { CertificateFiles } from "@kvt/certs";
import { ensureCa, ensureLeaf } from "@kvt/local-cluster";

/** The service network's first address: the `kubernetes` Service's ClusterIP, in the API server's certificate. */
export const KUBERNETES_SERVICE_IP = "10.96.0.1";

/** Every file the control plane's flags name. */
export interface ControlPlanePki {
  readonly dir: string;
  readonly ca: CertificateFiles;
  readonly apiserver: CertificateFiles;
  readonly apiserverKubeletClient: CertificateFiles;
  readonly admin: CertificateFiles;
  readonly controllerManager: CertificateFiles;
  readonly scheduler: CertificateFiles;
  readonly controllerManagerServer: CertificateFiles;
  readonly schedulerServer: CertificateFiles;
  readonly frontProxyCa: CertificateFiles;
  readonly frontProxyClient: CertificateFiles;
  readonly etcdCa: CertificateFiles;
  readonly etcdServer: CertificateFiles;
  readonly apiserverEtcdClient: CertificateFiles;
  readonly etcdHealthcheckClient: CertificateFiles;
  /** Every node's kube-proxy (kubeadm gives them one service account; here one client certificate). */
  readonly kubeProxy: CertificateFiles;
  /** Service-account signing key (PKCS#8) and its public key (SPKI). */
  readonly serviceAccountKey: string;
  readonly serviceAccountPub: string;
}

const LOOPBACK = { dnsNames: ["localhost"], ipAddresses: ["127.0.0.1"] };
const API_NAMES = [
  "localhost",
  "kubernetes",
  "kubernetes.default",
  "kubernetes.default.svc",
  "kubernetes.default.svc.cluster.local",
];

/** The pki file layout of `dir` (pure: what ensureControlPlanePki makes). */
export function controlPlanePkiFiles(dir: string): ControlPlanePki {
  const f = (name: string): CertificateFiles => ({ cert: join(dir, `${name}.crt`), key: join(dir, `${name}.key`) });
  return {
    dir,
    ca: f("ca"),
    apiserver: f("apiserver"),
    apiserverKubeletClient: f("apiserver-kubelet-client"),
    admin: f("admin"),
    controllerManager: f("controller-manager"),
    scheduler: f("scheduler"),
    controllerManagerServer: f("controller-manager-server"),
    schedulerServer: f("scheduler-server"),
    frontProxyCa: f("front-proxy-ca"),
    frontProxyClient: f("front-proxy-client"),
    etcdCa: f("etcd-ca"),
    etcdServer: f("etcd-server"),
    apiserverEtcdClient: f("apiserver-etcd-client"),
    etcdHealthcheckClient: f("etcd-healthcheck-client"),
    kubeProxy: f("kube-proxy"),
    serviceAccountKey: join(dir, "sa.key"),
    serviceAccountPub: join(dir, "sa.pub"),
  };
}

/** Removes `<dir>/<name>.crt` (and its key) when it does not name `ip`, so that ensureLeaf makes it again. */
function dropIfLacksIp(dir: string, name: string, ip: string): void {
  const cert = join(dir, `${name}.crt`);
  if (existsSync(cert) && !new X509Certificate(readFileSync(cert)).checkIP(ip)) {
    rmSync(cert, { force: true });
    rmSync(join(dir, `${name}.key`), { force: true });
  }
}

/**
 * Makes (or keeps) every certificate and key of the control plane in `dir`. `hostIp` is the bridge address the
 * API server also serves on (the nodes reach it there); a certificate made for another address is made again.
 */
export async function ensureControlPlanePki(dir: string, hostIp: string): Promise<ControlPlanePki> {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const ca = await ensureCa(dir, "ca");
  dropIfLacksIp(dir, "apiserver", hostIp);
  await ensureLeaf(dir, "apiserver", ca, {
    commonName: "kube-apiserver",
    dnsNames: API_NAMES,
    ipAddresses: ["127.0.0.1", hostIp, KUBERNETES_SERVICE_IP],
  });
  const client = (commonName: string, organization?: string) => ({
    commonName,
    organization,
    usage: "client" as const,
  });
  await ensureLeaf(dir, "apiserver-kubelet-client", ca, client("kube-apiserver-kubelet-client", "system:masters"));
  await ensureLeaf(dir, "admin", ca, client("kubernetes-admin", "system:masters"));
  await ensureLeaf(dir, "controller-manager", ca, client("system:kube-controller-manager"));
  await ensureLeaf(dir, "scheduler", ca, client("system:kube-scheduler"));
  await ensureLeaf(dir, "kube-proxy", ca, client("system:kube-proxy"));
  await ensureLeaf(dir, "controller-manager-server", ca, { commonName: "kube-controller-manager", ...LOOPBACK });
  await ensureLeaf(dir, "scheduler-server", ca, { commonName: "kube-scheduler", ...LOOPBACK });

  const frontProxyCa = await ensureCa(dir, "front-proxy-ca");
  await ensureLeaf(dir, "front-proxy-client", frontProxyCa, client("front-proxy-client"));

  const etcdCa = await ensureCa(dir, "etcd-ca");
  await ensureLeaf(dir, "etcd-server", etcdCa, { commonName: "etcd", ...LOOPBACK, usage: "both" });
  await ensureLeaf(dir, "apiserver-etcd-client", etcdCa, client("kube-apiserver-etcd-client"));
  await ensureLeaf(dir, "etcd-healthcheck-client", etcdCa, client("kube-etcd-healthcheck-client"));

  const files = controlPlanePkiFiles(dir);
  if (!existsSync(files.serviceAccountKey) || !existsSync(files.serviceAccountPub)) {
    const { privateKey, publicKey } = generateKeyPairSync("ec", {
      namedCurve: "P-256",
      privateKeyEncoding: { type: "pkcs8", format: "pem" },
      publicKeyEncoding: { type: "spki", format: "pem" },
    });
    writeFileSync(files.serviceAccountKey, privateKey, { mode: 0o600 });
    writeFileSync(files.serviceAccountPub, publicKey, { mode: 0o644 });
  }
  chmodSync(files.serviceAccountKey, 0o600);
  return files;
}

/** A node's two certificates. */
export interface NodeCertificates {
  /** The kubelet's client identity: CN=system:node:<node>, O=system:nodes. */
  readonly client: CertificateFiles;
  /** The kubelet's serving certificate, for the node's name and address. */
  readonly serving: CertificateFiles;
}

/** The file layout of a node's certificates in `dir` (pure). */
export function nodeCertificateFiles(dir: string, node: string): NodeCertificates {
  const f = (name: string): CertificateFiles => ({ cert: join(dir, `${name}.crt`), key: join(dir, `${name}.key`) });
  return { client: f(`kubelet-${node}-client`), serving: f(`kubelet-${node}-server`) };
}

/** Makes (or keeps) each node's client and serving certificate from the cluster CA (after ensureControlPlanePki). */
export async function ensureNodeCertificates(
  dir: string,
  nodes: readonly { readonly name: string; readonly ip: string }[],
): Promise<Record<string, NodeCertificates>> {
  const ca = await ensureCa(dir, "ca");
  const result: Record<string, NodeCertificates> = {};
  for (const { name, ip } of nodes) {
    const commonName = `system:node:${name}`;
    await ensureLeaf(dir, `kubelet-${name}-client`, ca, { commonName, organization: "system:nodes", usage: "client" });
    dropIfLacksIp(dir, `kubelet-${name}-server`, ip);
    await ensureLeaf(dir, `kubelet-${name}-server`, ca, { commonName, dnsNames: [name], ipAddresses: [ip] });
    result[name] = nodeCertificateFiles(dir, name);
  }
  return result;
}

/** The registry's certificates, and the client's in the directory layout skopeo's --dest-cert-dir reads. */
export interface RegistryCertificates {
  readonly server: CertificateFiles;
  readonly client: CertificateFiles;
  /** `ca.crt`, `client.cert`, `client.key`: the CA to trust and the client certificate to present. */
  readonly clientDir: string;
}

/** Makes (or keeps) the registry's serving certificate for `hostIp` and its client certificate. */
export async function ensureRegistryCertificates(dir: string, hostIp: string): Promise<RegistryCertificates> {
  const ca = await ensureCa(dir, "ca");
  dropIfLacksIp(dir, "registry-server", hostIp);
  const server = await ensureLeaf(dir, "registry-server", ca, { commonName: "kvt-registry", ipAddresses: [hostIp] });
  const client = await ensureLeaf(dir, "registry-client", ca, { commonName: "kvt-registry-client", usage: "client" });
  const clientDir = join(dir, "registry-client.d");
  mkdirSync(clientDir, { recursive: true, mode: 0o700 });
  copyFileSync(join(dir, "ca.crt"), join(clientDir, "ca.crt"));
  copyFileSync(client.cert, join(clientDir, "client.cert"));
  copyFileSync(client.key, join(clientDir, "client.key"));
  chmodSync(join(clientDir, "client.key"), 0o600);
  return { server, client, clientDir };
}
