/**
 * The control plane's command lines and kubeconfigs (pure: layout in, argv and text out), as kubeadm writes its
 * static pods, on loopback ports chosen once per cluster directory:
 *
 *   etcd (TLS, client-cert auth) <-- kube-apiserver (TLS; Node,RBAC; NodeRestriction + the default admission
 *        plugins; service-account keys; aggregation with front-proxy certificates) <-- controller-manager, scheduler
 *        (client-certificate kubeconfigs; delegated authn/authz; serving on their own secure ports)
 *
 * etcd, the controller manager and the scheduler listen on 127.0.0.1; kube-apiserver on the cluster bridge's
 * address (node-network.ts), which the host and the nodes' network namespaces both reach.
 */
import { join } from "node:path";
import { stringify } from "yaml";
import type { ControlPlanePki } from "./control-plane-pki.ts";

/** The loopback ports of one cluster. */
export interface ControlPlanePorts {
  readonly etcdClient: number;
  readonly etcdPeer: number;
  readonly apiserver: number;
  readonly controllerManager: number;
  readonly scheduler: number;
  /** The local registry (docker-registry), on the bridge address. */
  readonly registry: number;
}

/** Where one cluster's files are. */
export interface ControlPlaneLayout {
  /** The cluster directory (`<data-dir>/cluster`). */
  readonly dir: string;
  /** The directory of the built binaries. */
  readonly binDir: string;
  readonly pki: ControlPlanePki;
  readonly ports: ControlPlanePorts;
  /** The cluster bridge's address: kube-apiserver's bind and advertise address. */
  readonly hostIp: string;
  /** The nodes' pod CIDRs are allocated from this (--cluster-cidr). */
  readonly clusterCidr: string;
}

/** The service network (kubeadm's default). */
export const SERVICE_CIDR = "10.96.0.0/12";

/** The paths derived from a cluster directory. */
export const clusterPaths = (dir: string) => ({
  etcdData: join(dir, "etcd"),
  logs: join(dir, "logs"),
  adminKubeconfig: join(dir, "admin.kubeconfig"),
  controllerManagerKubeconfig: join(dir, "controller-manager.kubeconfig"),
  schedulerKubeconfig: join(dir, "scheduler.kubeconfig"),
  state: join(dir, "state.json"),
  ports: join(dir, "ports.json"),
  network: join(dir, "network.json"),
  nodes: join(dir, "nodes"),
  daemonLog: join(dir, "logs", "supervisor.log"),
});

/** The API server's URL. */
export const apiserverUrl = (layout: Pick<ControlPlaneLayout, "hostIp" | "ports">): string =>
  `https://${layout.hostIp}:${layout.ports.apiserver}`;

/** etcd: one member on loopback, TLS with client-certificate auth on the client and peer ports. */
export function etcdArgs(layout: ControlPlaneLayout): string[] {
  const { pki, ports } = layout;
  const client = `https://127.0.0.1:${ports.etcdClient}`;
  const peer = `https://127.0.0.1:${ports.etcdPeer}`;
  return [
    join(layout.binDir, "etcd"),
    "--name=default",
    `--data-dir=${clusterPaths(layout.dir).etcdData}`,
    `--listen-client-urls=${client}`,
    `--advertise-client-urls=${client}`,
    `--listen-peer-urls=${peer}`,
    `--initial-advertise-peer-urls=${peer}`,
    `--initial-cluster=default=${peer}`,
    "--initial-cluster-state=new",
    `--cert-file=${pki.etcdServer.cert}`,
    `--key-file=${pki.etcdServer.key}`,
    "--client-cert-auth=true",
    `--trusted-ca-file=${pki.etcdCa.cert}`,
    `--peer-cert-file=${pki.etcdServer.cert}`,
    `--peer-key-file=${pki.etcdServer.key}`,
    "--peer-client-cert-auth=true",
    `--peer-trusted-ca-file=${pki.etcdCa.cert}`,
    "--snapshot-count=10000",
    "--log-level=warn",
  ];
}

/**
 * The admission plugins enabled on top of kube-apiserver's defaults (which already include NamespaceLifecycle,
 * LimitRanger, ServiceAccount, PodSecurity, Priority, DefaultTolerationSeconds, DefaultStorageClass,
 * StorageObjectInUseProtection, RuntimeClass, ResourceQuota, the certificate plugins and the webhooks/policies):
 * kubeadm adds NodeRestriction.
 */
export const EXTRA_ADMISSION_PLUGINS = ["NodeRestriction"] as const;

/** kube-apiserver, as kubeadm configures it, on loopback. */
export function apiserverArgs(layout: ControlPlaneLayout): string[] {
  const { pki, ports } = layout;
  return [
    join(layout.binDir, "kube-apiserver"),
    `--advertise-address=${layout.hostIp}`,
    `--bind-address=${layout.hostIp}`,
    `--secure-port=${ports.apiserver}`,
    `--etcd-servers=https://127.0.0.1:${ports.etcdClient}`,
    `--etcd-cafile=${pki.etcdCa.cert}`,
    `--etcd-certfile=${pki.apiserverEtcdClient.cert}`,
    `--etcd-keyfile=${pki.apiserverEtcdClient.key}`,
    `--client-ca-file=${pki.ca.cert}`,
    `--tls-cert-file=${pki.apiserver.cert}`,
    `--tls-private-key-file=${pki.apiserver.key}`,
    "--authorization-mode=Node,RBAC",
    `--enable-admission-plugins=${EXTRA_ADMISSION_PLUGINS.join(",")}`,
    "--allow-privileged=true",
    "--anonymous-auth=true",
    `--service-cluster-ip-range=${SERVICE_CIDR}`,
    "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
    `--service-account-key-file=${pki.serviceAccountPub}`,
    `--service-account-signing-key-file=${pki.serviceAccountKey}`,
    `--kubelet-client-certificate=${pki.apiserverKubeletClient.cert}`,
    `--kubelet-client-key=${pki.apiserverKubeletClient.key}`,
    `--kubelet-certificate-authority=${pki.ca.cert}`,
    "--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname",
    `--proxy-client-cert-file=${pki.frontProxyClient.cert}`,
    `--proxy-client-key-file=${pki.frontProxyClient.key}`,
    `--requestheader-client-ca-file=${pki.frontProxyCa.cert}`,
    "--requestheader-allowed-names=front-proxy-client",
    "--requestheader-extra-headers-prefix=X-Remote-Extra-",
    "--requestheader-group-headers=X-Remote-Group",
    "--requestheader-username-headers=X-Remote-User",
    // No kube-proxy on the host: the aggregator dials an APIService's endpoints, not its ClusterIP.
    "--enable-aggregator-routing=true",
  ];
}

/** kube-controller-manager: every controller plus the bootstrap-token ones, service-account credentials, CSR signing. */
export function controllerManagerArgs(layout: ControlPlaneLayout): string[] {
  const { pki, ports } = layout;
  const paths = clusterPaths(layout.dir);
  const kubeconfig = paths.controllerManagerKubeconfig;
  return [
    join(layout.binDir, "kube-controller-manager"),
    `--kubeconfig=${kubeconfig}`,
    `--authentication-kubeconfig=${kubeconfig}`,
    `--authorization-kubeconfig=${kubeconfig}`,
    "--bind-address=127.0.0.1",
    `--secure-port=${ports.controllerManager}`,
    `--tls-cert-file=${pki.controllerManagerServer.cert}`,
    `--tls-private-key-file=${pki.controllerManagerServer.key}`,
    `--client-ca-file=${pki.ca.cert}`,
    `--requestheader-client-ca-file=${pki.frontProxyCa.cert}`,
    `--root-ca-file=${pki.ca.cert}`,
    `--service-account-private-key-file=${pki.serviceAccountKey}`,
    `--cluster-signing-cert-file=${pki.ca.cert}`,
    `--cluster-signing-key-file=${pki.ca.key}`,
    "--use-service-account-credentials=true",
    "--controllers=*,bootstrapsigner,tokencleaner",
    "--cluster-name=kvt-kube",
    "--allocate-node-cidrs=true",
    `--cluster-cidr=${layout.clusterCidr}`,
    "--node-cidr-mask-size=24",
    `--service-cluster-ip-range=${SERVICE_CIDR}`,
    "--leader-elect=false",
  ];
}

/** kube-scheduler with its defaults. */
export function schedulerArgs(layout: ControlPlaneLayout): string[] {
  const paths = clusterPaths(layout.dir);
  const kubeconfig = paths.schedulerKubeconfig;
  return [
    join(layout.binDir, "kube-scheduler"),
    `--kubeconfig=${kubeconfig}`,
    `--authentication-kubeconfig=${kubeconfig}`,
    `--authorization-kubeconfig=${kubeconfig}`,
    "--bind-address=127.0.0.1",
    `--secure-port=${layout.ports.scheduler}`,
    `--tls-cert-file=${layout.pki.schedulerServer.cert}`,
    `--tls-private-key-file=${layout.pki.schedulerServer.key}`,
    `--client-ca-file=${layout.pki.ca.cert}`,
    `--requestheader-client-ca-file=${layout.pki.frontProxyCa.cert}`,
    "--leader-elect=false",
  ];
}

/** A kubeconfig that authenticates with a client certificate (files referenced by path, as kubeadm's are inlined). */
export function renderCertKubeconfig(
  server: string,
  caFile: string,
  client: { readonly cert: string; readonly key: string },
  user: string,
): string {
  const name = "kvt-kube";
  return stringify({
    apiVersion: "v1",
    kind: "Config",
    clusters: [{ name, cluster: { server, "certificate-authority": caFile } }],
    users: [{ name: user, user: { "client-certificate": client.cert, "client-key": client.key } }],
    contexts: [{ name: `${user}@${name}`, context: { cluster: name, user } }],
    "current-context": `${user}@${name}`,
    preferences: {},
  });
}

/** The kubeconfigs the control plane writes: path -> text. */
export function controlPlaneKubeconfigs(layout: ControlPlaneLayout): Record<string, string> {
  const { pki } = layout;
  const paths = clusterPaths(layout.dir);
  const server = apiserverUrl(layout);
  return {
    [paths.adminKubeconfig]: renderCertKubeconfig(server, pki.ca.cert, pki.admin, "kubernetes-admin"),
    [paths.controllerManagerKubeconfig]: renderCertKubeconfig(
      server,
      pki.ca.cert,
      pki.controllerManager,
      "system:kube-controller-manager",
    ),
    [paths.schedulerKubeconfig]: renderCertKubeconfig(server, pki.ca.cert, pki.scheduler, "system:kube-scheduler"),
  };
}
