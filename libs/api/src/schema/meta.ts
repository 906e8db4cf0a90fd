/**
 * Kubernetes building blocks the kubevirt.io types embed: object metadata, conditions, tolerations, affinity and
 * label selectors (schemas, trimmed to the fields KubeVirt users and our components touch).
 */
import { arr, bool, freeform, int, map, obj, str, time } from "./builder.ts";

/** metav1.ObjectMeta, as the code sees it (the CRD root carries only `metadata: {type: object}`). */
export const objectMetaSchema = obj({
  name: str(),
  generateName: str(),
  namespace: str(),
  selfLink: str(),
  uid: str(),
  resourceVersion: str(),
  generation: int({ format: "int64" }),
  creationTimestamp: time({ nullable: true }),
  deletionTimestamp: time({ nullable: true }),
  deletionGracePeriodSeconds: int({ format: "int64" }),
  labels: map(str()),
  annotations: map(str()),
  finalizers: arr(str()),
  ownerReferences: arr(
    obj(
      {
        apiVersion: str(),
        kind: str(),
        name: str(),
        uid: str(),
        controller: bool(),
        blockOwnerDeletion: bool(),
      },
      { required: ["apiVersion", "kind", "name", "uid"] },
    ),
  ),
  managedFields: arr(freeform()),
});

/** A status condition as KubeVirt writes them (VM, VMI and VMIM conditions share this shape). */
export const conditionSchema = obj(
  {
    type: str(),
    status: str({ description: 'One of "True", "False", "Unknown".' }),
    lastProbeTime: time({ nullable: true }),
    lastTransitionTime: time({ nullable: true }),
    reason: str(),
    message: str(),
  },
  { required: ["type", "status"] },
);

/** core/v1 Toleration. */
export const tolerationSchema = obj({
  key: str(),
  operator: str({ description: 'Exists or Equal (default "Equal").' }),
  value: str(),
  effect: str({ description: "NoSchedule, PreferNoSchedule or NoExecute; empty matches all." }),
  tolerationSeconds: int({ format: "int64" }),
});

const selectorRequirement = obj({ key: str(), operator: str(), values: arr(str()) }, { required: ["key", "operator"] });

/** metav1.LabelSelector. */
export const labelSelectorSchema = obj({ matchLabels: map(str()), matchExpressions: arr(selectorRequirement) });

const nodeSelectorTerm = obj({ matchExpressions: arr(selectorRequirement), matchFields: arr(selectorRequirement) });

const podAffinityTerm = obj(
  {
    labelSelector: labelSelectorSchema,
    namespaceSelector: labelSelectorSchema,
    namespaces: arr(str()),
    topologyKey: str(),
    matchLabelKeys: arr(str(), { listType: "atomic" }),
    mismatchLabelKeys: arr(str(), { listType: "atomic" }),
  },
  { required: ["topologyKey"] },
);

const weightedPodAffinityTerm = obj({ weight: int(), podAffinityTerm }, { required: ["weight", "podAffinityTerm"] });

const podAffinity = obj({
  requiredDuringSchedulingIgnoredDuringExecution: arr(podAffinityTerm),
  preferredDuringSchedulingIgnoredDuringExecution: arr(weightedPodAffinityTerm),
});

/** core/v1 Affinity (node, pod and pod anti-affinity). */
export const affinitySchema = obj(
  {
    nodeAffinity: obj({
      requiredDuringSchedulingIgnoredDuringExecution: obj(
        { nodeSelectorTerms: arr(nodeSelectorTerm) },
        { required: ["nodeSelectorTerms"] },
      ),
      preferredDuringSchedulingIgnoredDuringExecution: arr(
        obj({ weight: int(), preference: nodeSelectorTerm }, { required: ["weight", "preference"] }),
      ),
    }),
    podAffinity,
    podAntiAffinity: podAffinity,
  },
  { description: "If affinity is specifies, obey all the affinity rules" },
);

/** `{name}` reference to a Secret or ConfigMap in the same namespace. */
export const localObjectReferenceSchema = obj({ name: str() });
