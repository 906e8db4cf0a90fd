/**
 * The migration target pod (pure; KubeVirt `migration.go` createTargetPod): the VMI's launcher pod plus the
 * migration labels, the VMIM's addedNodeSelector, and a required pod anti-affinity to the VMI's other launcher pods
 * on the same host, so the target never lands on the source node.
 */
import { ANNOTATION, LABEL, type VirtualMachineInstance, type VirtualMachineInstanceMigration } from "@kvt/api";
import type { Pod } from "@kvt/kube";
import { type PodTemplateOptions, renderLauncherPod } from "../vmi/pod-template.ts";

/**
 * Renders the target pod of `migration` for `vmi` (`cluster`: the cluster settings the launcher pod follows, and the
 * claims, whose volumeMode makes a volume a mount or a device as in the source pod).
 */
export function renderTargetPod(
  vmi: VirtualMachineInstance,
  migration: VirtualMachineInstanceMigration,
  cluster: Pick<PodTemplateOptions, "allowEmulation" | "claims" | "launcherImage"> = {},
): Pod {
  const antiAffinity = {
    requiredDuringSchedulingIgnoredDuringExecution: [
      {
        labelSelector: {
          matchExpressions: [{ key: LABEL.createdBy, operator: "In", values: [vmi.metadata?.uid ?? ""] }],
        },
        topologyKey: "kubernetes.io/hostname",
      },
    ],
  };
  const base = (vmi.spec.affinity ?? {}) as Record<string, unknown>;
  const pod = renderLauncherPod(vmi, {
    ...cluster,
    labels: {
      [LABEL.migrationJob]: migration.metadata?.uid ?? "",
      [LABEL.migrationName]: migration.metadata?.name ?? "",
    },
    nodeSelector: migration.spec.addedNodeSelector,
    affinity: { ...base, podAntiAffinity: antiAffinity },
  });
  pod.metadata!.annotations = {
    ...pod.metadata!.annotations,
    [ANNOTATION.migrationJobName]: migration.metadata?.name ?? "",
  };
  const traceparent = migration.metadata?.annotations?.[ANNOTATION.traceparent];
  if (traceparent) pod.metadata!.annotations[ANNOTATION.traceparent] = traceparent;
  return pod;
}
