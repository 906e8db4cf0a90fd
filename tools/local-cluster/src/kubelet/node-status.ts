/**
 * The Node object a process-kubelet registers and the status it heartbeats (pure). Every simulated node lives on
 * this machine, so it reports the machine's CPUs and memory, address 127.0.0.1 and its own kubelet port (the API
 * server reaches `pods/log` through `status.daemonEndpoints.kubeletEndpoint`, as on a real cluster).
 */
import type { V1Node, V1NodeStatus } from "../cluster/kube-models.ts";

/** What the node reports about itself. */
export interface NodeFacts {
  readonly nodeName: string;
  readonly cpus: number;
  readonly memoryBytes: number;
  readonly kubeletPort: number;
  readonly kernelVersion: string;
  readonly kubeletVersion: string;
}

/** The Node to create when it does not exist yet. */
export function nodeObject(facts: NodeFacts): V1Node {
  return {
    apiVersion: "v1",
    kind: "Node",
    metadata: {
      name: facts.nodeName,
      labels: {
        "kubernetes.io/hostname": facts.nodeName,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "amd64",
      },
    },
    spec: {},
  };
}

/**
 * The status written at registration and on every heartbeat; `devices` are the device plugins' resources (the
 * device manager's capacity and allocatable).
 */
export function nodeStatus(
  facts: NodeFacts,
  now: Date,
  readySince: Date,
  devices: { capacity: Record<string, string>; allocatable: Record<string, string> } = {
    capacity: {},
    allocatable: {},
  },
): V1NodeStatus {
  const resources = {
    cpu: String(facts.cpus),
    memory: String(facts.memoryBytes),
    pods: "110",
    "ephemeral-storage": "100Gi",
  };
  const ok = (type: string, reason: string, message: string) => ({
    type,
    status: "False",
    reason,
    message,
    lastHeartbeatTime: now.toISOString(),
    lastTransitionTime: readySince.toISOString(),
  });
  return {
    capacity: { ...resources, ...devices.capacity },
    allocatable: { ...resources, ...devices.allocatable },
    addresses: [
      { type: "InternalIP", address: "127.0.0.1" },
      { type: "Hostname", address: facts.nodeName },
    ],
    daemonEndpoints: { kubeletEndpoint: { Port: facts.kubeletPort } },
    conditions: [
      ok("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
      ok("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
      ok("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
      {
        type: "Ready",
        status: "True",
        reason: "KubeletReady",
        message: "kubelet is posting ready status",
        lastHeartbeatTime: now.toISOString(),
        lastTransitionTime: readySince.toISOString(),
      },
    ],
    nodeInfo: {
      architecture: "amd64",
      bootID: "",
      containerRuntimeVersion: "process://local",
      kernelVersion: facts.kernelVersion,
      kubeProxyVersion: "",
      kubeletVersion: facts.kubeletVersion,
      machineID: "",
      operatingSystem: "linux",
      osImage: "local process runtime",
      systemUUID: "",
    },
  };
}
