/**
 * One node's files and command lines (pure: layout in, text and argv out). A node is a kubelet and a containerd,
 * both started inside the node's network namespace and the node's mount namespace (`nsenter --net --mount`), so
 * the kubelet's volume mounts are what containerd's containers see, and no other node or the host sees them. In
 * that mount namespace the node's kubelet directory is bound at /var/lib/kubelet, the kubelet's default root dir,
 * which hostPath volumes such as virt-handler's /var/lib/kubelet/pods and device-plugins name:
 *
 *   <cluster-dir>/nodes/<node>/                       /run/kvtk-<tag>/<node>/
 *     kubelet/            at /var/lib/kubelet           mnt            the mount namespace (nsfs bind)
 *     kubelet-config.yaml KubeletConfiguration          containerd/    containerd's state (rootfs mounts, shm,
 *     kube-proxy.yaml, kube-proxy.kubeconfig  kube-proxy (nftables mode: the node's Service rules)
 *                                                                      pod netns under netns/)
 *     kubelet.kubeconfig  system:node:<node> cert       containerd.sock, containerd.sock.ttrpc
 *     containerd/         containerd's root (images)    runc/          runc's state (--root)
 *     containerd.toml     its config (version 4)        s/             the shims' sockets
 *     certs.d/<registry>/hosts.toml   the local registry (TLS, the cluster CA, a client certificate)
 *     certs.d/docker.io/hosts.toml    docker.io through the local registry, so deploy/'s `kubevirt-ts/...` images
 *                                     resolve there unchanged
 *     cni/10-<net>.conflist  bridge cni0 + host-local on the node's podCIDR (written once the node has one)
 *     cni-ipam/ pod-logs/ volume-plugins/ opt/
 *
 * This host runs cgroup v1: the kubelet needs `failCgroupV1: false` and the cgroupfs driver, and its cgroupRoot
 * must exist beforehand (node-host.ts). The sandbox image is the local registry's pause (node-images.ts).
 */
import { join } from "node:path";
import type { HostTool } from "@kvt/images";
import { DEBIAN_CNI_BIN_DIR } from "@kvt/local-cluster";
import { stringify } from "yaml";

/** Where one node lives, and who it is. */
export interface NodeLayout {
  readonly name: string;
  /** The node's address on the cluster bridge (--node-ip, the kubelet's serving address). */
  readonly ip: string;
  /** Its network namespace's name (/run/netns/<netns>). */
  readonly netns: string;
  /** `<cluster-dir>/nodes/<name>`. */
  readonly dir: string;
  /** `/run/kvtk-<tag>/<name>` (short: unix socket paths stop at 107 bytes). */
  readonly runDir: string;
  /** The kubelet's cgroupRoot, e.g. `/kvtk-1a2b3c-node01`. */
  readonly cgroupRoot: string;
  /** The CNI network's name (`kvtk-<tag>`): libcni caches results as `<name>-<container>-<if>`. */
  readonly cniNetwork: string;
}

/** The cluster-wide facts a node's files name. */
export interface NodeClusterFacts {
  readonly binDir: string;
  /** The API server's URL as the nodes reach it (the bridge address). */
  readonly apiserverUrl: string;
  /** The cluster CA (the API server's serving CA, and the kubelet's client CA). */
  readonly caFile: string;
  /** `HOST:PORT` of the local registry. */
  readonly registry: string;
  /** The sandbox image, with the registry (`<registry>/kvt/pause:<tag>`). */
  readonly sandboxImage: string;
  /** The registry's client certificate (the registry asks every client for one of the cluster CA). */
  readonly registryClient: { readonly cert: string; readonly key: string };
  /** kube-proxy's client certificate (CN=system:kube-proxy). */
  readonly kubeProxyCert: { readonly cert: string; readonly key: string };
  /** The cluster's pod CIDRs (kube-proxy tells local traffic by them). */
  readonly clusterCidr: string;
  /** The node's client certificate (CN=system:node:<name>, O=system:nodes) and serving certificate. */
  readonly clientCert: { readonly cert: string; readonly key: string };
  readonly servingCert: { readonly cert: string; readonly key: string };
}

/** Every path of a node. */
export function nodePaths(node: Pick<NodeLayout, "dir" | "runDir">) {
  return {
    /** What is bound at {@link KUBELET_ROOT} in the node's mount namespace. */
    kubeletRoot: join(node.dir, "kubelet"),
    mountNamespace: join(node.runDir, "mnt"),
    kubeletConfig: join(node.dir, "kubelet-config.yaml"),
    kubeconfig: join(node.dir, "kubelet.kubeconfig"),
    kubeProxyConfig: join(node.dir, "kube-proxy.yaml"),
    kubeProxyKubeconfig: join(node.dir, "kube-proxy.kubeconfig"),
    containerdRoot: join(node.dir, "containerd"),
    containerdConfig: join(node.dir, "containerd.toml"),
    registryHosts: join(node.dir, "certs.d"),
    cniConfDir: join(node.dir, "cni"),
    ipamDir: join(node.dir, "cni-ipam"),
    podLogs: join(node.dir, "pod-logs"),
    volumePlugins: join(node.dir, "volume-plugins"),
    opt: join(node.dir, "opt"),
    containerdState: join(node.runDir, "containerd"),
    containerdSocket: join(node.runDir, "containerd.sock"),
    runcRoot: join(node.runDir, "runc"),
    shimSockets: join(node.runDir, "s"),
  };
}

/** The kubelet's root dir inside a node's mount namespace (its default, which manifests' hostPaths name). */
export const KUBELET_ROOT = "/var/lib/kubelet";

/** Debian's runc, the OCI runtime containerd's runc shim runs on every node. */
export const RUNC = "/usr/sbin/runc";

/** What the nodes' containerd runs besides our binaries: Debian's runc (installed by `up` when missing). */
export const NODE_RUNTIME_TOOLS: readonly HostTool[] = [{ bin: RUNC, pkg: "runc" }];

/** A TOML basic string (JSON's escapes are TOML's for these paths and names). */
const q = (s: string): string => JSON.stringify(s);

/** containerd's config (version 4), everything per node: no path is shared with another node or the host. */
export function containerdConfig(node: NodeLayout, facts: Pick<NodeClusterFacts, "sandboxImage">): string {
  const p = nodePaths(node);
  const cri = "plugins.'io.containerd.cri.v1";
  return [
    "version = 4",
    `root = ${q(p.containerdRoot)}`,
    `state = ${q(p.containerdState)}`,
    "imports = []",
    "",
    "[plugins.'io.containerd.server.v1.grpc']",
    `  address = ${q(p.containerdSocket)}`,
    "[plugins.'io.containerd.server.v1.ttrpc']",
    `  address = ${q(`${p.containerdSocket}.ttrpc`)}`,
    "",
    `[${cri}.images']`,
    "  snapshotter = 'overlayfs'",
    `[${cri}.images'.pinned_images]`,
    `  sandbox = ${q(facts.sandboxImage)}`,
    `[${cri}.images'.registry]`,
    `  config_path = ${q(p.registryHosts)}`,
    "",
    `[${cri}.runtime']`,
    // The kubelet asks for oom_score_adj -998 for sandboxes; lowering a score needs CAP_SYS_RESOURCE, which this
    // host's bounding set lacks: without this every sandbox fails in runc ("can't get final child's PID").
    "  restrict_oom_score_adj = true",
    "  netns_mounts_under_state_dir = true",
    // A volumeDevice's node in the container is owned by the container's user (runAsUser/runAsGroup), not root:
    // the non-root virt-launcher (107) opens its Block claims' devices, as KubeVirt requires of containerd.
    "  device_ownership_from_security_context = true",
    `[${cri}.runtime'.containerd]`,
    "  default_runtime_name = 'runc'",
    `[${cri}.runtime'.containerd.runtimes.runc]`,
    "  runtime_type = 'io.containerd.runc.v2'",
    `[${cri}.runtime'.containerd.runtimes.runc.options]`,
    `  BinaryName = '${RUNC}'`,
    `  Root = ${q(p.runcRoot)}`,
    "  SystemdCgroup = false",
    `[${cri}.runtime'.cni]`,
    `  bin_dirs = [${q(DEBIAN_CNI_BIN_DIR)}]`,
    `  conf_dir = ${q(p.cniConfDir)}`,
    "  max_conf_num = 1",
    "",
    "[plugins.'io.containerd.grpc.v1.cri']",
    "  stream_server_address = '127.0.0.1'",
    "  stream_server_port = '0'",
    "[plugins.'io.containerd.shim.v1.manager']",
    `  socket_dir = ${q(p.shimSockets)}`,
    "[plugins.'io.containerd.internal.v1.opt']",
    `  path = ${q(p.opt)}`,
    "[plugins.'io.containerd.transfer.v1.local']",
    `  config_path = ${q(p.registryHosts)}`,
    // NRI's socket is host-wide (/var/run/nri/nri.sock); no node needs it.
    "[plugins.'io.containerd.nri.v1.nri']",
    "  disable = true",
    "",
  ].join("\n");
}

/** The upstream docker.io's images are looked up first in the local registry (deploy/'s images name no registry). */
export const DOCKER_HUB = { host: "docker.io", server: "https://registry-1.docker.io" } as const;

/**
 * A hosts.toml for pulls from `server` that go to the local registry first (pull and resolve only), over TLS
 * verified against the cluster CA, with the registry's client certificate.
 */
export function registryHostsToml(
  server: string,
  facts: Pick<NodeClusterFacts, "registry" | "caFile" | "registryClient">,
): string {
  return [
    `server = ${q(server)}`,
    "",
    `[host.${q(`https://${facts.registry}`)}]`,
    "  capabilities = ['pull', 'resolve']",
    `  ca = ${q(facts.caFile)}`,
    `  client = [[${q(facts.registryClient.cert)}, ${q(facts.registryClient.key)}]]`,
    "",
  ].join("\n");
}

/** Each hosts.toml of a node (containerd looks for `<config_path>/<host[:port]>/hosts.toml`): path -> text. */
export function registryHostsFiles(
  node: Pick<NodeLayout, "dir" | "runDir">,
  facts: Pick<NodeClusterFacts, "registry" | "caFile" | "registryClient">,
): Record<string, string> {
  const dir = nodePaths(node).registryHosts;
  return {
    [join(dir, facts.registry, "hosts.toml")]: registryHostsToml(`https://${facts.registry}`, facts),
    [join(dir, DOCKER_HUB.host, "hosts.toml")]: registryHostsToml(DOCKER_HUB.server, facts),
  };
}

/** The KubeletConfiguration of a node. */
export function kubeletConfig(node: NodeLayout, facts: NodeClusterFacts): string {
  const p = nodePaths(node);
  return stringify({
    apiVersion: "kubelet.config.k8s.io/v1beta1",
    kind: "KubeletConfiguration",
    // cgroup v1 on this host: a current kubelet refuses it unless told not to.
    failCgroupV1: false,
    cgroupDriver: "cgroupfs",
    cgroupRoot: node.cgroupRoot,
    cgroupsPerQOS: true,
    enforceNodeAllocatable: ["pods"],
    failSwapOn: false,
    containerRuntimeEndpoint: `unix://${p.containerdSocket}`,
    address: node.ip,
    port: 10250,
    readOnlyPort: 0,
    healthzBindAddress: "127.0.0.1",
    healthzPort: 10248,
    tlsCertFile: facts.servingCert.cert,
    tlsPrivateKeyFile: facts.servingCert.key,
    authentication: {
      anonymous: { enabled: false },
      webhook: { enabled: true },
      x509: { clientCAFile: facts.caFile },
    },
    authorization: { mode: "Webhook" },
    clusterDomain: "cluster.local",
    podLogsDir: p.podLogs,
    volumePluginDir: p.volumePlugins,
    resolvConf: "/etc/resolv.conf",
    // Several kubelets share this machine's disk and memory: evict only when nearly nothing is left.
    evictionHard: {
      "memory.available": "100Mi",
      "nodefs.available": "2%",
      "nodefs.inodesFree": "2%",
      "imagefs.available": "2%",
    },
    imageGCHighThresholdPercent: 99,
    imageGCLowThresholdPercent: 98,
    serializeImagePulls: false,
    maxPods: 110,
    registerNode: true,
    // The host lacks CAP_SYS_RESOURCE: the kubelet cannot lower its own OOM score either.
    oomScoreAdj: 0,
    logging: { format: "text" },
  });
}

/** The kubelet's argv, run inside the node's namespaces. */
export function kubeletArgs(node: NodeLayout, facts: Pick<NodeClusterFacts, "binDir">): string[] {
  const p = nodePaths(node);
  return [
    ...inNetns(node),
    join(facts.binDir, "kubelet"),
    `--config=${p.kubeletConfig}`,
    `--kubeconfig=${p.kubeconfig}`,
    `--root-dir=${KUBELET_ROOT}`,
    `--hostname-override=${node.name}`,
    `--node-ip=${node.ip}`,
    "--v=1",
  ];
}

/** containerd's argv, run inside the node's namespaces. */
export function containerdArgs(node: NodeLayout, facts: Pick<NodeClusterFacts, "binDir">): string[] {
  return [...inNetns(node), join(facts.binDir, "containerd"), "--config", nodePaths(node).containerdConfig];
}

/** containerd's and kube-proxy's environment: the shim, Debian's runc and nft on the PATH. */
export function containerdEnv(facts: Pick<NodeClusterFacts, "binDir">): Record<string, string> {
  return { PATH: `${facts.binDir}:/usr/sbin:/usr/bin:/sbin:/bin` };
}

/** kube-proxy's health port, on the node's address (plain HTTP, as on every cluster: load balancers probe it). */
export const KUBE_PROXY_HEALTHZ_PORT = 10256;

/**
 * The node's KubeProxyConfiguration: nftables mode in the node's network namespace, where the pods' packets are
 * routed (cni0 is their gateway). It leaves the conntrack table size alone (nf_conntrack_max is host-wide and not
 * writable from a node's namespace) and its own OOM score (no CAP_SYS_RESOURCE here).
 */
export function kubeProxyConfig(node: NodeLayout, facts: Pick<NodeClusterFacts, "clusterCidr">): string {
  return stringify({
    apiVersion: "kubeproxy.config.k8s.io/v1alpha1",
    kind: "KubeProxyConfiguration",
    mode: "nftables",
    clientConnection: { kubeconfig: nodePaths(node).kubeProxyKubeconfig },
    hostnameOverride: node.name,
    bindAddress: node.ip,
    healthzBindAddress: `${node.ip}:${KUBE_PROXY_HEALTHZ_PORT}`,
    metricsBindAddress: "127.0.0.1:10249",
    clusterCIDR: facts.clusterCidr,
    nodePortAddresses: [`${node.ip}/32`],
    oomScoreAdj: 0,
    conntrack: { maxPerCore: 0, min: 0, tcpEstablishedTimeout: "0s", tcpCloseWaitTimeout: "0s" },
    logging: { format: "text" },
  });
}

/** kube-proxy's argv, run inside the node's namespaces. */
export function kubeProxyArgs(node: NodeLayout, facts: Pick<NodeClusterFacts, "binDir">): string[] {
  return [...inNetns(node), join(facts.binDir, "kube-proxy"), `--config=${nodePaths(node).kubeProxyConfig}`];
}

/** `nsenter --net=... --mount=... --`: exec in the node's network and mount namespaces (same pid, no fork). */
function inNetns(node: Pick<NodeLayout, "netns" | "dir" | "runDir">): string[] {
  return ["nsenter", `--net=/run/netns/${node.netns}`, `--mount=${nodePaths(node).mountNamespace}`, "--"];
}

/**
 * The node's CNI network: the bridge plugin's `cni0` in the node's namespace as the pods' gateway (its forwarding
 * was switched on by node-network.ts, so isGateway touches nothing on the host), host-local addresses from the
 * node's podCIDR, a default route to the gateway; the node's routes take packets to other nodes' pods.
 */
export function cniConfList(node: NodeLayout, podCidr: string): string {
  return `${JSON.stringify(
    {
      cniVersion: "1.0.0",
      name: node.cniNetwork,
      plugins: [
        {
          type: "bridge",
          bridge: "cni0",
          isGateway: true,
          ipMasq: false,
          hairpinMode: true,
          ipam: {
            type: "host-local",
            dataDir: nodePaths(node).ipamDir,
            ranges: [[{ subnet: podCidr }]],
            routes: [{ dst: "0.0.0.0/0" }],
          },
        },
      ],
    },
    null,
    2,
  )}\n`;
}

/** The conflist's file (containerd loads the first one of its conf_dir). */
export function cniConfListFile(node: Pick<NodeLayout, "dir" | "runDir" | "cniNetwork">): string {
  return join(nodePaths(node).cniConfDir, `10-${node.cniNetwork}.conflist`);
}
