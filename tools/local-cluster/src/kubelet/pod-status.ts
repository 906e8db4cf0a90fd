/**
 * The Pod status the process-kubelet reports, computed from its containers' run states (pure).
 *
 *   any container waiting (not started)   -> Pending
 *   some running                          -> Running   (restartPolicy Never: a finished sidecar keeps it Running)
 *   all terminated, every exit code 0     -> Succeeded
 *   all terminated, any non-zero          -> Failed
 */
import type { V1ContainerStatus, V1Pod, V1PodCondition, V1PodStatus } from "../cluster/kube-models.ts";

/** What the kubelet knows about one container. */
export interface ContainerRunState {
  readonly name: string;
  readonly image: string;
  readonly state: "waiting" | "running" | "terminated";
  readonly reason?: string;
  readonly message?: string;
  readonly exitCode?: number;
  readonly startedAt?: Date;
  readonly finishedAt?: Date;
}

/** The pod phase for these container states. */
export function podPhase(containers: readonly ContainerRunState[]): "Pending" | "Running" | "Succeeded" | "Failed" {
  if (containers.length === 0 || containers.some((c) => c.state === "waiting")) return "Pending";
  if (containers.some((c) => c.state === "running")) return "Running";
  return containers.every((c) => c.exitCode === 0) ? "Succeeded" : "Failed";
}

function containerStatus(c: ContainerRunState): V1ContainerStatus {
  const base = {
    name: c.name,
    image: c.image,
    imageID: `local://${c.image}`,
    restartCount: 0,
    started: c.state === "running",
  };
  if (c.state === "running")
    return { ...base, ready: true, state: { running: { startedAt: c.startedAt?.toISOString() } } };
  if (c.state === "terminated") {
    return {
      ...base,
      ready: false,
      state: {
        terminated: {
          exitCode: c.exitCode ?? 137,
          reason: c.reason ?? (c.exitCode === 0 ? "Completed" : "Error"),
          message: c.message,
          startedAt: c.startedAt?.toISOString(),
          finishedAt: c.finishedAt?.toISOString(),
        },
      },
    };
  }
  return { ...base, ready: false, state: { waiting: { reason: c.reason ?? "ContainerCreating", message: c.message } } };
}

function condition(type: string, ok: boolean, now: Date, reason?: string): V1PodCondition {
  return {
    type,
    status: ok ? "True" : "False",
    lastTransitionTime: now.toISOString(),
    lastProbeTime: undefined,
    reason,
  };
}

/**
 * The full status for `pod` given its containers' states; keeps earlier transition times when unchanged.
 * `sandboxReady` false (volumes not set up yet) reports PodReadyToStartContainers False, as kubelet does before
 * the pod's sandbox exists. `podIPs` are the pod's addresses on the pod network (none: it shares the node's).
 */
export function podStatus(
  pod: V1Pod,
  containers: readonly ContainerRunState[],
  now: Date,
  sandboxReady = true,
  podIPs: readonly string[] = ["127.0.0.1"],
): V1PodStatus {
  const phase = podPhase(containers);
  const allRunning = containers.length > 0 && containers.every((c) => c.state === "running");
  const reason = allRunning
    ? undefined
    : phase === "Succeeded" || phase === "Failed"
      ? "PodCompleted"
      : "ContainersNotReady";
  const previous = new Map((pod.status?.conditions ?? []).map((c) => [c.type, c]));
  const keep = (c: V1PodCondition): V1PodCondition => {
    const old = previous.get(c.type);
    return old && old.status === c.status ? { ...c, lastTransitionTime: old.lastTransitionTime } : c;
  };
  return {
    phase,
    hostIP: "127.0.0.1",
    hostIPs: [{ ip: "127.0.0.1" }],
    podIP: podIPs[0],
    podIPs: podIPs.map((ip) => ({ ip })),
    startTime: pod.status?.startTime ?? now.toISOString(),
    qosClass: pod.status?.qosClass ?? "Burstable",
    conditions: [
      keep(condition("PodReadyToStartContainers", sandboxReady, now)),
      keep(condition("Initialized", true, now)),
      keep(condition("Ready", allRunning, now, reason)),
      keep(condition("ContainersReady", allRunning, now, reason)),
      keep(condition("PodScheduled", true, now)),
    ],
    containerStatuses: containers.map(containerStatus),
  };
}
