/**
 * kwok (sigs.k8s.io/kwok, built by `npm run kube -- build`): simulated nodes for the scale bench. The kwok
 * controller manages the Nodes that carry the annotation `kwok.x-k8s.io/node: fake` and plays kwok's own Stages on
 * them and on the Pods bound to them, so a Node we create becomes Ready and keeps its Lease, and a Pod the scheduler
 * binds there turns Running and Ready without any container:
 *
 *   create Node (annotated, capacity incl. the devices.kubevirt.io/* resources virt-handler's plugins announce)
 *     -> kwok: node-initialize (Ready, addresses, nodeInfo), node-heartbeat-with-lease (Lease every ~10 s)
 *   scheduler binds a Pod to it -> kwok: pod-ready (phase Running, conditions, pod IP from the node's podCIDR or
 *     --cidr), pod-complete (Job pods only), pod-delete (finalizers gone, object deleted once deletion starts)
 *
 * The Stage definitions are kwok's own YAML files (the ones kwokctl's default cluster uses), copied by the build
 * from the pinned module into `<bin-dir>/kwok-stages.yaml`, so a run needs neither the Go module cache nor network.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { closeSync, openSync } from "node:fs";
import { join } from "node:path";
import { CORE_V1, isAlreadyExists, type Node, type RestClient, resourceClient } from "@kvt/kube";

/** kwok's Stage files (paths in the sigs.k8s.io/kwok module) the controller runs: kwokctl's default "fast" set. */
export const KWOK_STAGE_FILES: readonly string[] = [
  "kustomize/stage/node/fast/node-initialize.yaml",
  "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
  "kustomize/stage/pod/fast/pod-ready.yaml",
  "kustomize/stage/pod/fast/pod-complete.yaml",
  "kustomize/stage/pod/fast/pod-delete.yaml",
];

/** The file, beside the binaries, that holds those Stages as one multi-document YAML (kwok's `--config`). */
export const KWOK_STAGES_FILE = "kwok-stages.yaml";

/** The annotation (and value) by which kwok picks the Nodes it manages. */
export const KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node";
export const KWOK_NODE_ANNOTATION_VALUE = "fake";

/** The Node Lease duration kwok renews (kubelet's default nodeLeaseDurationSeconds). */
export const KWOK_NODE_LEASE_SECONDS = 40;

/** Pod IPs on a node without a podCIDR (the embedded server allocates none): room for 65,534 pods. */
export const KWOK_DEFAULT_POD_CIDR = "10.128.0.0/16";

/**
 * The Stages file's text from the Stage files' texts (in {@link KWOK_STAGE_FILES} order): one YAML stream. Throws
 * when a file is not a single kwok Stage, so a module whose layout changed fails the build, not the run.
 */
export function renderKwokStages(files: readonly { readonly path: string; readonly text: string }[]): string {
  const docs = files.map(({ path, text }) => {
    const body = text.replace(/^---\s*\n/, "").trimEnd();
    if (!/^apiVersion: kwok\.x-k8s\.io\/v1alpha1$/m.test(body) || !/^kind: Stage$/m.test(body)) {
      throw new Error(`${path} is not a kwok Stage (want apiVersion kwok.x-k8s.io/v1alpha1, kind Stage)`);
    }
    if (/^---\s*$/m.test(body)) throw new Error(`${path} holds more than one YAML document`);
    return `# ${path}\n${body}\n`;
  });
  return docs.join("---\n");
}

/** What kwok runs against. */
export interface KwokOptions {
  /** The directory of the built binaries (kwok and kwok-stages.yaml). */
  readonly binDir: string;
  /** A kubeconfig allowed to read Nodes and Pods and write their status, Leases and Pod deletions. */
  readonly kubeconfig: string;
  /** Pod IPs for nodes without a podCIDR (default {@link KWOK_DEFAULT_POD_CIDR}). */
  readonly cidr?: string;
}

/** kwok's command line: only the annotated Nodes, the Stages from the file, Leases renewed, no kubelet server. */
export function kwokArgs(o: KwokOptions): string[] {
  return [
    join(o.binDir, "kwok"),
    `--kubeconfig=${o.kubeconfig}`,
    `--config=${join(o.binDir, KWOK_STAGES_FILE)}`,
    `--manage-nodes-with-annotation-selector=${KWOK_NODE_ANNOTATION}=${KWOK_NODE_ANNOTATION_VALUE}`,
    `--node-lease-duration-seconds=${KWOK_NODE_LEASE_SECONDS}`,
    `--cidr=${o.cidr ?? KWOK_DEFAULT_POD_CIDR}`,
  ];
}

/** What one simulated node offers. */
export interface FakeNodeCapacity {
  readonly cpu: string;
  readonly memory: string;
  readonly pods: number;
  /** Extended resources (device plugins' `devices.kubevirt.io/kvm`, ...), by name. */
  readonly extended?: Readonly<Record<string, string>>;
}

/** A node that fits a hundred launcher pods: each asks for 100m CPU, about 300 MiB and one of each device. */
export const DEFAULT_FAKE_NODE: FakeNodeCapacity = {
  cpu: "64",
  memory: "256Gi",
  pods: 250,
  extended: { "devices.kubevirt.io/kvm": "1k", "devices.kubevirt.io/tun": "1k", "devices.kubevirt.io/vhost-net": "1k" },
};

/** The names of `count` simulated nodes: kwok-node-000, kwok-node-001, ... (zero-padded to sort). */
export function fakeNodeNames(count: number): string[] {
  if (!Number.isInteger(count) || count < 1) throw new RangeError(`node count must be a positive integer: ${count}`);
  const width = Math.max(3, String(count - 1).length);
  return Array.from({ length: count }, (_, i) => `kwok-node-${String(i).padStart(width, "0")}`);
}

/**
 * One simulated Node: kwok's annotation, the labels a kubelet sets (`kubernetes.io/hostname`, `type: kwok`) and
 * virt-handler's `kubevirt.io/schedulable: "true"` (launcher pods select it), its capacity as both capacity and
 * allocatable. No taint: the launcher pods need no toleration to land there.
 */
export function fakeNode(name: string, capacity: FakeNodeCapacity = DEFAULT_FAKE_NODE): Node {
  const resources = { cpu: capacity.cpu, memory: capacity.memory, pods: String(capacity.pods), ...capacity.extended };
  return {
    apiVersion: "v1",
    kind: "Node",
    metadata: {
      name,
      annotations: { [KWOK_NODE_ANNOTATION]: KWOK_NODE_ANNOTATION_VALUE, "node.alpha.kubernetes.io/ttl": "0" },
      labels: {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "kubevirt.io/schedulable": "true",
        type: "kwok",
      },
    },
    spec: {},
    status: { capacity: resources, allocatable: resources },
  };
}

/** Creates the simulated Nodes (an existing one is left as it is). */
export async function createFakeNodes(transport: RestClient, names: readonly string[]): Promise<void> {
  const nodes = resourceClient<Node>(transport, CORE_V1.nodes);
  await Promise.all(
    names.map((name) =>
      nodes.create(fakeNode(name)).catch((error: unknown) => {
        if (!isAlreadyExists(error)) throw error;
      }),
    ),
  );
}

/** A running kwok controller. */
export interface KwokProcess {
  readonly pid: number;
  /** SIGTERM, then resolves once it exited. */
  stop(): Promise<void>;
}

/** Starts kwok with its output in `logFile`; it dies with this process (setpriv's parent-death signal). */
export function startKwok(o: KwokOptions & { readonly logFile: string }): KwokProcess {
  const out = openSync(o.logFile, "a");
  const argv = kwokArgs(o);
  const child: ChildProcess = spawn("setpriv", ["--pdeathsig", "SIGTERM", "--", ...argv], {
    stdio: ["ignore", out, out],
  });
  closeSync(out);
  if (child.pid === undefined) throw new Error(`cannot start ${argv[0]} (setpriv from util-linux missing?)`);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  return {
    pid: child.pid,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      await exited;
    },
  };
}
