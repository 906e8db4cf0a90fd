/**
 * What the process-kubelet calls to put a pod on the pod network (kept out of kubelet.ts, which owns the container
 * lifecycle): the sandbox before the first container starts, the containers' command lines and downward-API
 * addresses inside it, status.podIPs, and the teardown once the pod is gone. A pod with `hostNetwork: true` stays
 * in the node's namespace, as on a real node.
 */
import type { V1Container, V1Pod } from "../cluster/kube-models.ts";
import type { ContainerPlan } from "../kubelet/container-spec.ts";
import { type PodNetworkConfig, readPodNetworkFile } from "./cluster-network.ts";
import { inSandbox, PodNetwork, type PodSandbox, type PortMapping } from "./pod-network.ts";

/** The pod network as one kubelet uses it. */
export class KubeletNetwork {
  readonly #network: PodNetwork;
  readonly #sandboxes = new Map<string, PodSandbox>();

  constructor(config: PodNetworkConfig, nodeName: string) {
    this.#network = new PodNetwork(config, nodeName);
  }

  /** The kubelet's network from the cluster's plan file (`--pod-network FILE`). */
  static fromFile(file: string, nodeName: string): KubeletNetwork {
    return new KubeletNetwork(readPodNetworkFile(file), nodeName);
  }

  /**
   * Wires the pod's sandbox (adopting an intact one a previous kubelet made). Call before its containers start and
   * again after a failure; rejects with a CniError whose message the kubelet reports as FailedCreatePodSandBox.
   */
  async attach(pod: V1Pod): Promise<void> {
    const uid = pod.metadata?.uid;
    if (!uid || pod.spec?.hostNetwork || this.#sandboxes.has(uid)) return;
    const sandbox = await this.#network.attach({
      uid,
      namespace: pod.metadata?.namespace ?? "default",
      name: pod.metadata?.name ?? "",
      portMappings: hostPorts(pod),
    });
    this.#sandboxes.set(uid, sandbox);
  }

  /**
   * The plan of `container` inside the pod's sandbox: `make` sees the pod with its addresses in status (so
   * `status.podIP` fieldRefs resolve to them), and a process runs under nsenter in the pod's namespace with
   * POD_IP set. A pod without a sandbox runs on the node's network as planned, without POD_IP even where the pod
   * declares it (virt-controller's launcher pod does, from status.podIP): the launcher takes POD_IP to mean that it
   * runs in its pod's own network namespace (virt-launcher main.ts), which such a process does not.
   */
  plan(pod: V1Pod, container: V1Container, make: (pod: V1Pod, container: V1Container) => ContainerPlan): ContainerPlan {
    const sandbox = this.#sandboxes.get(pod.metadata?.uid ?? "");
    if (!sandbox) {
      const plan = make(pod, container);
      if (plan.kind !== "process" || !("POD_IP" in plan.env)) return plan;
      const { POD_IP: _, ...env } = plan.env;
      return { ...plan, env };
    }
    const withIps: V1Pod = {
      ...pod,
      status: { ...pod.status, podIP: sandbox.ips[0], podIPs: sandbox.ips.map((ip) => ({ ip })) },
    };
    const plan = make(withIps, container);
    if (plan.kind !== "process") return plan;
    return { ...plan, argv: inSandbox(plan.argv, sandbox), env: { ...plan.env, POD_IP: sandbox.ips[0] } };
  }

  /**
   * The pod's addresses (status.podIPs), or undefined while it has no sandbox. A pod an earlier kubelet wired keeps
   * its recorded addresses until attach() has checked the sandbox, so its status never flips to another address.
   */
  podIPs(uid: string): readonly string[] | undefined {
    return this.#sandboxes.get(uid)?.ips ?? this.#network.recordedIps(uid);
  }

  /** Tears the pod's sandbox down once its containers have stopped. Idempotent. */
  async detach(uid: string): Promise<void> {
    this.#sandboxes.delete(uid);
    await this.#network.detach(uid);
  }
}

/** The containers' hostPorts in portmap's shape (containerPort defaults as the API server's defaulting does). */
export function hostPorts(pod: V1Pod): PortMapping[] {
  return (pod.spec?.containers ?? []).flatMap((c) =>
    (c.ports ?? [])
      .filter((p) => p.hostPort)
      .map((p) => ({
        hostPort: p.hostPort!,
        containerPort: p.containerPort,
        protocol: (p.protocol ?? "TCP").toLowerCase(),
      })),
  );
}
