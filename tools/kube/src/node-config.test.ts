import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { controlPlanePkiFiles } from "./control-plane-pki.ts";
import {
  cniConfList,
  cniConfListFile,
  containerdArgs,
  containerdConfig,
  kubeletArgs,
  kubeletConfig,
  kubeProxyArgs,
  kubeProxyConfig,
  type NodeClusterFacts,
  type NodeLayout,
  registryHostsFiles,
} from "./node-config.ts";
import { registryConfig } from "./registry.ts";

const node: NodeLayout = {
  name: "node01",
  ip: "10.200.255.11",
  netns: "kvtk-abc123-1",
  dir: "/d/cluster/nodes/node01",
  runDir: "/run/kvtk-abc123/node01",
  cgroupRoot: "/kvtk-abc123-node01",
  cniNetwork: "kvtk-abc123",
};
const facts: NodeClusterFacts = {
  binDir: "/d/bin",
  apiserverUrl: "https://10.200.255.1:6443",
  caFile: "/d/cluster/pki/ca.crt",
  registry: "10.200.255.1:5000",
  sandboxImage: "10.200.255.1:5000/kubevirt-ts/pause:1.0",
  registryClient: { cert: "/p/r.crt", key: "/p/r.key" },
  kubeProxyCert: { cert: "/p/kp.crt", key: "/p/kp.key" },
  clusterCidr: "10.200.0.0/17",
  clientCert: { cert: "/p/c.crt", key: "/p/c.key" },
  servingCert: { cert: "/p/s.crt", key: "/p/s.key" },
};

/** The `key = value` lines under `[table]` of a TOML text (enough for the flat tables containerdConfig writes). */
function table(toml: string, name: string): Record<string, string> {
  const lines = toml.split("\n");
  const start = lines.indexOf(`[${name}]`);
  if (start < 0) throw new Error(`no [${name}]`);
  const out: Record<string, string> = {};
  for (const line of lines.slice(start + 1)) {
    if (line.startsWith("[") || line.trim() === "") break;
    const [k, ...v] = line.trim().split(" = ");
    out[k] = v.join(" = ");
  }
  return out;
}

describe("containerdConfig", () => {
  const toml = containerdConfig(node, facts);

  it("keeps every path of the node its own: root, state, sockets, runc's state, shims, CNI, registry hosts", () => {
    expect(toml).toMatch(/^version = 4\n/);
    expect(toml).toContain('root = "/d/cluster/nodes/node01/containerd"');
    expect(toml).toContain('state = "/run/kvtk-abc123/node01/containerd"');
    expect(table(toml, "plugins.'io.containerd.server.v1.grpc'").address).toBe(
      '"/run/kvtk-abc123/node01/containerd.sock"',
    );
    expect(table(toml, "plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options")).toEqual({
      BinaryName: "'/usr/sbin/runc'",
      Root: '"/run/kvtk-abc123/node01/runc"',
      SystemdCgroup: "false",
    });
    expect(table(toml, "plugins.'io.containerd.shim.v1.manager'").socket_dir).toBe('"/run/kvtk-abc123/node01/s"');
    expect(table(toml, "plugins.'io.containerd.cri.v1.runtime'.cni")).toEqual({
      bin_dirs: '["/usr/lib/cni"]',
      conf_dir: '"/d/cluster/nodes/node01/cni"',
      max_conf_num: "1",
    });
    expect(table(toml, "plugins.'io.containerd.cri.v1.images'.registry").config_path).toBe(
      '"/d/cluster/nodes/node01/certs.d"',
    );
    expect(table(toml, "plugins.'io.containerd.nri.v1.nri'").disable).toBe("true");
  });

  it("pins our pause image and keeps the sandbox's OOM score as this host allows", () => {
    expect(table(toml, "plugins.'io.containerd.cri.v1.images'.pinned_images").sandbox).toBe(
      '"10.200.255.1:5000/kubevirt-ts/pause:1.0"',
    );
    expect(table(toml, "plugins.'io.containerd.cri.v1.runtime'").restrict_oom_score_adj).toBe("true");
    expect(table(toml, "plugins.'io.containerd.cri.v1.runtime'").netns_mounts_under_state_dir).toBe("true");
    expect(table(toml, "plugins.'io.containerd.cri.v1.runtime'").device_ownership_from_security_context).toBe("true");
  });
});

describe("registry access", () => {
  it("pulls from the local registry over TLS with a client certificate, and docker.io's images through it too", () => {
    const files = registryHostsFiles(node, facts);
    const host = [
      '[host."https://10.200.255.1:5000"]',
      "  capabilities = ['pull', 'resolve']",
      '  ca = "/d/cluster/pki/ca.crt"',
      '  client = [["/p/r.crt", "/p/r.key"]]',
      "",
    ].join("\n");
    expect(files).toEqual({
      "/d/cluster/nodes/node01/certs.d/10.200.255.1:5000/hosts.toml": `server = "https://10.200.255.1:5000"\n\n${host}`,
      "/d/cluster/nodes/node01/certs.d/docker.io/hosts.toml": `server = "https://registry-1.docker.io"\n\n${host}`,
    });
  });

  it("runs the registry on the bridge address over TLS, for clients of the cluster CA only", () => {
    const ports = { etcdClient: 1, etcdPeer: 2, apiserver: 3, controllerManager: 4, scheduler: 5, registry: 5000 };
    const pki = controlPlanePkiFiles("/d/cluster/pki");
    const config = parse(registryConfig({ dir: "/d/cluster", hostIp: "10.200.255.1", ports, pki }));
    expect(config.http).toEqual({
      addr: "10.200.255.1:5000",
      tls: {
        certificate: "/d/cluster/pki/registry-server.crt",
        key: "/d/cluster/pki/registry-server.key",
        clientcas: ["/d/cluster/pki/ca.crt"],
      },
    });
    expect(config.storage.filesystem.rootdirectory).toBe("/d/cluster/registry/storage");
  });
});

describe("kubelet", () => {
  it("runs on cgroup v1 with its own cgroup root, serves on the node address, authenticates every caller", () => {
    const config = parse(kubeletConfig(node, facts));
    expect(config).toMatchObject({
      kind: "KubeletConfiguration",
      failCgroupV1: false,
      cgroupDriver: "cgroupfs",
      cgroupRoot: "/kvtk-abc123-node01",
      containerRuntimeEndpoint: "unix:///run/kvtk-abc123/node01/containerd.sock",
      address: "10.200.255.11",
      readOnlyPort: 0,
      tlsCertFile: "/p/s.crt",
      authentication: {
        anonymous: { enabled: false },
        webhook: { enabled: true },
        x509: { clientCAFile: facts.caFile },
      },
      authorization: { mode: "Webhook" },
      podLogsDir: "/d/cluster/nodes/node01/pod-logs",
      volumePluginDir: "/d/cluster/nodes/node01/volume-plugins",
    });
  });

  it("starts the kubelet and containerd inside the node's network and mount namespaces", () => {
    const kubelet = kubeletArgs(node, facts);
    expect(kubelet.slice(0, 5)).toEqual([
      "nsenter",
      "--net=/run/netns/kvtk-abc123-1",
      "--mount=/run/kvtk-abc123/node01/mnt",
      "--",
      "/d/bin/kubelet",
    ]);
    expect(kubelet).toContain("--node-ip=10.200.255.11");
    expect(kubelet).toContain("--hostname-override=node01");
    // The default root dir, which manifests' hostPaths name; the node's own directory is bound there.
    expect(kubelet).toContain("--root-dir=/var/lib/kubelet");
    expect(containerdArgs(node, facts)).toEqual([
      "nsenter",
      "--net=/run/netns/kvtk-abc123-1",
      "--mount=/run/kvtk-abc123/node01/mnt",
      "--",
      "/d/bin/containerd",
      "--config",
      "/d/cluster/nodes/node01/containerd.toml",
    ]);
  });
});

describe("kube-proxy", () => {
  it("programs the node's Service rules with nftables, leaving host-wide conntrack settings alone", () => {
    expect(parse(kubeProxyConfig(node, facts))).toEqual({
      apiVersion: "kubeproxy.config.k8s.io/v1alpha1",
      kind: "KubeProxyConfiguration",
      mode: "nftables",
      clientConnection: { kubeconfig: "/d/cluster/nodes/node01/kube-proxy.kubeconfig" },
      hostnameOverride: "node01",
      bindAddress: "10.200.255.11",
      healthzBindAddress: "10.200.255.11:10256",
      metricsBindAddress: "127.0.0.1:10249",
      clusterCIDR: "10.200.0.0/17",
      nodePortAddresses: ["10.200.255.11/32"],
      oomScoreAdj: 0,
      conntrack: { maxPerCore: 0, min: 0, tcpEstablishedTimeout: "0s", tcpCloseWaitTimeout: "0s" },
      logging: { format: "text" },
    });
    expect(kubeProxyArgs(node, facts).slice(3)).toEqual([
      "--",
      "/d/bin/kube-proxy",
      "--config=/d/cluster/nodes/node01/kube-proxy.yaml",
    ]);
  });
});

describe("cniConfList", () => {
  it("attaches pods to cni0 in the node with addresses from the node's podCIDR, cached under the cluster's name", () => {
    const list = JSON.parse(cniConfList(node, "10.200.3.0/24"));
    expect(list.name).toBe("kvtk-abc123");
    expect(list.plugins[0]).toEqual({
      type: "bridge",
      bridge: "cni0",
      isGateway: true,
      ipMasq: false,
      hairpinMode: true,
      ipam: {
        type: "host-local",
        dataDir: "/d/cluster/nodes/node01/cni-ipam",
        ranges: [[{ subnet: "10.200.3.0/24" }]],
        routes: [{ dst: "0.0.0.0/0" }],
      },
    });
    expect(cniConfListFile(node)).toBe("/d/cluster/nodes/node01/cni/10-kvtk-abc123.conflist");
  });
});
