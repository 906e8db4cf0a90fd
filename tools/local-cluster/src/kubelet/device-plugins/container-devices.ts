/**
 * Applies the device plugins' Allocate answers to a container of the process runtime (pure, given `exists`), the
 * way the runtime applies everything else: its processes are not containerized (no mount namespace, no device
 * cgroup; only the pod's network namespace), so they see the node's /dev, and mounts reach them through
 * KVT_VOLUME_MOUNTS (container-spec.ts). So, per answer:
 *
 *   envs          set in the container's environment (over its own, as the kubelet appends them)
 *   mounts        appended to KVT_VOLUME_MOUNTS: {mountPath: container_path, hostPath: host_path, readOnly}
 *   devices       the node must exist on the host, at the same path the container asks for (the process opens the
 *                 node's own /dev); otherwise the container cannot be created (CreateContainerError, runc's message)
 *   annotations   CRI annotations for the runtime: this runtime has no use for them
 *   cdi_devices   not supported by this runtime: CreateContainerError naming them
 */
import type { ContainerPlan } from "../container-spec.ts";
import { VOLUME_MOUNTS_ENV, type VolumeMountEntry } from "../container-spec.ts";
import type { ContainerDevices } from "./device-manager.ts";

/** `plan` with `devices` applied (unchanged when there are none, or for containers that are not processes). */
export function withDevices(
  plan: ContainerPlan,
  devices: ContainerDevices,
  exists: (path: string) => boolean,
): ContainerPlan {
  if (plan.kind !== "process" || devices.length === 0) return plan;
  const cannot = (message: string): ContainerPlan => ({
    kind: "unrunnable",
    name: plan.name,
    reason: "CreateContainerError",
    message,
  });
  const env = { ...plan.env };
  const mounts: VolumeMountEntry[] = JSON.parse(env[VOLUME_MOUNTS_ENV] ?? "[]") as VolumeMountEntry[];
  for (const answer of devices) {
    const cdi = (answer.cdiDevices ?? []).map((d) => d.name);
    if (cdi.length > 0) return cannot(`CDI devices are not supported by the local process runtime: ${cdi.join(", ")}`);
    for (const d of answer.devices ?? []) {
      if (d.containerPath !== d.hostPath)
        return cannot(
          `the local process runtime gives containers the node's own device nodes: cannot make ${d.hostPath} appear at ${d.containerPath}`,
        );
      if (!exists(d.hostPath))
        return cannot(
          `error gathering device information while adding custom device ${JSON.stringify(d.hostPath)}: no such file or directory`,
        );
    }
    Object.assign(env, answer.envs ?? {});
    for (const m of answer.mounts ?? [])
      mounts.push({ mountPath: m.containerPath, hostPath: m.hostPath, readOnly: m.readOnly });
  }
  env[VOLUME_MOUNTS_ENV] = JSON.stringify(mounts);
  return { ...plan, env };
}
