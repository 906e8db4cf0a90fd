import { X509Certificate } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import {
  apiserverArgs,
  type ControlPlaneLayout,
  controllerManagerArgs,
  controlPlaneKubeconfigs,
  etcdArgs,
  schedulerArgs,
} from "./control-plane.ts";
import {
  controlPlanePkiFiles,
  ensureControlPlanePki,
  ensureNodeCertificates,
  ensureRegistryCertificates,
  KUBERNETES_SERVICE_IP,
} from "./control-plane-pki.ts";

const ports = {
  etcdClient: 2379,
  etcdPeer: 2380,
  apiserver: 6443,
  controllerManager: 10257,
  scheduler: 10259,
  registry: 5000,
};
const layout: ControlPlaneLayout = {
  dir: "/d/cluster",
  binDir: "/d/bin/v1.37.2",
  pki: controlPlanePkiFiles("/d/cluster/pki"),
  ports,
  hostIp: "10.200.255.1",
  clusterCidr: "10.200.0.0/17",
};

/** The value of `--name=value` in `args`. */
const flag = (args: string[], name: string): string | undefined =>
  args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);

describe("component command lines", () => {
  it("runs etcd with TLS and client-certificate auth on both ports", () => {
    const args = etcdArgs(layout);
    expect(args[0]).toBe("/d/bin/v1.37.2/etcd");
    expect(flag(args, "listen-client-urls")).toBe("https://127.0.0.1:2379");
    expect(flag(args, "initial-cluster")).toBe("default=https://127.0.0.1:2380");
    expect(flag(args, "client-cert-auth")).toBe("true");
    expect(flag(args, "peer-client-cert-auth")).toBe("true");
    expect(flag(args, "trusted-ca-file")).toBe("/d/cluster/pki/etcd-ca.crt");
    expect(flag(args, "data-dir")).toBe("/d/cluster/etcd");
  });

  it("runs kube-apiserver as kubeadm does: Node,RBAC, NodeRestriction, SA keys, aggregation, etcd over TLS", () => {
    const args = apiserverArgs(layout);
    expect(args[0]).toBe("/d/bin/v1.37.2/kube-apiserver");
    expect(flag(args, "secure-port")).toBe("6443");
    // On the bridge, where the nodes reach it; advertised there too, so the `kubernetes` Service has an endpoint.
    expect(flag(args, "bind-address")).toBe("10.200.255.1");
    expect(flag(args, "advertise-address")).toBe("10.200.255.1");
    expect(flag(args, "endpoint-reconciler-type")).toBeUndefined();
    expect(flag(args, "kubelet-certificate-authority")).toBe("/d/cluster/pki/ca.crt");
    expect(flag(args, "authorization-mode")).toBe("Node,RBAC");
    expect(flag(args, "enable-admission-plugins")).toBe("NodeRestriction");
    expect(flag(args, "etcd-servers")).toBe("https://127.0.0.1:2379");
    expect(flag(args, "etcd-certfile")).toBe("/d/cluster/pki/apiserver-etcd-client.crt");
    expect(flag(args, "client-ca-file")).toBe("/d/cluster/pki/ca.crt");
    expect(flag(args, "service-account-key-file")).toBe("/d/cluster/pki/sa.pub");
    expect(flag(args, "service-account-signing-key-file")).toBe("/d/cluster/pki/sa.key");
    expect(flag(args, "proxy-client-cert-file")).toBe("/d/cluster/pki/front-proxy-client.crt");
    expect(flag(args, "requestheader-client-ca-file")).toBe("/d/cluster/pki/front-proxy-ca.crt");
    expect(flag(args, "requestheader-allowed-names")).toBe("front-proxy-client");
    // Each flag once: kube-apiserver takes the last of a repeated flag, which would hide a mistake.
    const names = args.slice(1).map((a) => a.split("=")[0]);
    expect(new Set(names).size).toBe(names.length);
  });

  it("runs the controller manager with CSR signing, SA credentials and node CIDRs", () => {
    const args = controllerManagerArgs(layout);
    expect(flag(args, "kubeconfig")).toBe("/d/cluster/controller-manager.kubeconfig");
    expect(flag(args, "cluster-signing-cert-file")).toBe("/d/cluster/pki/ca.crt");
    expect(flag(args, "service-account-private-key-file")).toBe("/d/cluster/pki/sa.key");
    expect(flag(args, "use-service-account-credentials")).toBe("true");
    expect(flag(args, "allocate-node-cidrs")).toBe("true");
    expect(flag(args, "cluster-cidr")).toBe("10.200.0.0/17");
    expect(flag(args, "node-cidr-mask-size")).toBe("24");
    expect(flag(args, "secure-port")).toBe("10257");
  });

  it("runs the scheduler on its port with its own kubeconfig and serving certificate", () => {
    const args = schedulerArgs(layout);
    expect(flag(args, "kubeconfig")).toBe("/d/cluster/scheduler.kubeconfig");
    expect(flag(args, "secure-port")).toBe("10259");
    expect(flag(args, "tls-cert-file")).toBe("/d/cluster/pki/scheduler-server.crt");
  });
});

describe("controlPlaneKubeconfigs", () => {
  it("writes client-certificate kubeconfigs for the admin, controller manager and scheduler", () => {
    const configs = controlPlaneKubeconfigs(layout);
    expect(Object.keys(configs).sort()).toEqual([
      "/d/cluster/admin.kubeconfig",
      "/d/cluster/controller-manager.kubeconfig",
      "/d/cluster/scheduler.kubeconfig",
    ]);
    const admin = parse(configs["/d/cluster/admin.kubeconfig"]);
    expect(admin.clusters[0].cluster).toEqual({
      server: "https://10.200.255.1:6443",
      "certificate-authority": "/d/cluster/pki/ca.crt",
    });
    expect(admin.users[0].user).toEqual({
      "client-certificate": "/d/cluster/pki/admin.crt",
      "client-key": "/d/cluster/pki/admin.key",
    });
    expect(admin.contexts[0].name).toBe(admin["current-context"]);
  });
});

describe("ensureControlPlanePki", () => {
  const dir = mkdtempSync(join(tmpdir(), "kube-pki-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("issues kubeadm's identities from the right CAs, once", async () => {
    const pki = await ensureControlPlanePki(dir, "10.200.255.1");
    const cert = (f: { cert: string }) => new X509Certificate(readFileSync(f.cert));
    const ca = cert(pki.ca);
    const apiserver = cert(pki.apiserver);
    expect(apiserver.verify(ca.publicKey)).toBe(true);
    expect(apiserver.checkIP("127.0.0.1")).toBe("127.0.0.1");
    expect(apiserver.checkIP("10.200.255.1")).toBe("10.200.255.1");
    expect(apiserver.checkIP(KUBERNETES_SERVICE_IP)).toBe(KUBERNETES_SERVICE_IP);
    expect(apiserver.checkHost("kubernetes.default.svc.cluster.local")).toBeTruthy();
    expect(cert(pki.admin).subject).toContain("O=system:masters");
    expect(cert(pki.controllerManager).subject).toContain("CN=system:kube-controller-manager");
    expect(cert(pki.frontProxyClient).verify(cert(pki.frontProxyCa).publicKey)).toBe(true);
    expect(cert(pki.apiserverEtcdClient).verify(cert(pki.etcdCa).publicKey)).toBe(true);
    expect(cert(pki.etcdServer).verify(ca.publicKey)).toBe(false);
    expect(statSync(pki.serviceAccountKey).mode & 0o777).toBe(0o600);
    expect(readFileSync(pki.serviceAccountPub, "utf8")).toContain("BEGIN PUBLIC KEY");

    const before = readFileSync(pki.apiserver.cert, "utf8");
    const saBefore = readFileSync(pki.serviceAccountKey, "utf8");
    await ensureControlPlanePki(dir, "10.200.255.1");
    expect(readFileSync(pki.apiserver.cert, "utf8")).toBe(before);
    expect(readFileSync(pki.serviceAccountKey, "utf8")).toBe(saBefore);
  });

  it("issues the API server's certificate again when the bridge address changed", async () => {
    const pki = await ensureControlPlanePki(dir, "10.201.255.1");
    const apiserver = new X509Certificate(readFileSync(pki.apiserver.cert));
    expect(apiserver.checkIP("10.201.255.1")).toBe("10.201.255.1");
    expect(apiserver.checkIP("10.200.255.1")).toBeUndefined();
  });

  it("issues each node a system:nodes client certificate and a serving certificate for its address", async () => {
    const certs = await ensureNodeCertificates(dir, [
      { name: "node01", ip: "10.201.255.11" },
      { name: "node02", ip: "10.201.255.12" },
    ]);
    const ca = new X509Certificate(readFileSync(join(dir, "ca.crt")));
    const client = new X509Certificate(readFileSync(certs.node02.client.cert));
    expect(client.subject).toContain("CN=system:node:node02");
    expect(client.subject).toContain("O=system:nodes");
    expect(client.verify(ca.publicKey)).toBe(true);
    const serving = new X509Certificate(readFileSync(certs.node02.serving.cert));
    expect(serving.checkIP("10.201.255.12")).toBe("10.201.255.12");
    expect(serving.checkIP("10.201.255.11")).toBeUndefined();
    expect(serving.verify(ca.publicKey)).toBe(true);
  });

  it("gives the registry a serving certificate for the bridge and a client certificate in skopeo's layout", async () => {
    const tls = await ensureRegistryCertificates(dir, "10.201.255.1");
    const server = new X509Certificate(readFileSync(tls.server.cert));
    expect(server.checkIP("10.201.255.1")).toBe("10.201.255.1");
    const client = new X509Certificate(readFileSync(join(tls.clientDir, "client.cert")));
    expect(client.verify(new X509Certificate(readFileSync(join(tls.clientDir, "ca.crt"))).publicKey)).toBe(true);
    expect(readFileSync(join(tls.clientDir, "client.key"), "utf8")).toBe(readFileSync(tls.client.key, "utf8"));
    expect(statSync(join(tls.clientDir, "client.key")).mode & 0o777).toBe(0o600);
  });
});
