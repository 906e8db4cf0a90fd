/**
 * kube-apiserver's DefaultTolerationSeconds admission plugin (on by default): a Pod created or updated without a
 * toleration of the `node.kubernetes.io/not-ready` or `node.kubernetes.io/unreachable` NoExecute taint gets one for
 * 300 s, so the node lifecycle controller evicts it five minutes after its node stops reporting. A toleration with an
 * empty key or an empty effect counts as tolerating them (plugin/pkg/admission/defaulttolerationseconds).
 *
 * Found by the scale bench: launcher pods on kube-apiserver carry both tolerations, here they had none.
 */
import type { KubeObject } from "../types.ts";
import type { AdmissionAttributes, MutatingAdmission } from "./types.ts";

/** The taint keys and the seconds (kube-apiserver's --default-*-toleration-seconds defaults). */
export const DEFAULT_TOLERATIONS = [
  { key: "node.kubernetes.io/not-ready", seconds: 300 },
  { key: "node.kubernetes.io/unreachable", seconds: 300 },
] as const;

interface Toleration {
  readonly key?: string;
  readonly effect?: string;
}

/** DefaultTolerationSeconds. */
export function defaultTolerationSecondsAdmission(): MutatingAdmission {
  return {
    name: "DefaultTolerationSeconds",
    admit(attrs: AdmissionAttributes): Promise<KubeObject | undefined> {
      const pod = attrs.object;
      const applies = attrs.operation === "CREATE" || attrs.operation === "UPDATE";
      if (!applies || attrs.group !== "" || attrs.resource !== "pods" || attrs.subResource !== "" || !pod)
        return Promise.resolve(undefined);
      const spec = (pod.spec ?? {}) as { tolerations?: Toleration[] };
      const tolerations = Array.isArray(spec.tolerations) ? spec.tolerations : [];
      const tolerates = (key: string): boolean =>
        tolerations.some((t) => (!t.key || t.key === key) && (!t.effect || t.effect === "NoExecute"));
      const added = DEFAULT_TOLERATIONS.filter((d) => !tolerates(d.key)).map((d) => ({
        key: d.key,
        operator: "Exists",
        effect: "NoExecute",
        tolerationSeconds: d.seconds,
      }));
      if (added.length === 0) return Promise.resolve(undefined);
      return Promise.resolve({ ...pod, spec: { ...spec, tolerations: [...tolerations, ...added] } });
    },
  };
}
