/**
 * core/v1 Pod and Node, trimmed to the fields the KubeVirt components read and write (plain JSON interfaces).
 * `Affinity` and `Toleration` are structural so the kubevirt.io types' copies assign to them.
 */
import type { KubeObject } from "./types.ts";

/** A resource list: `{ cpu: "100m", memory: "1Gi", "devices.kubevirt.io/kvm": "1" }`. */
export type ResourceList = Record<string, string>;

/** A container (the fields the launcher pod uses). */
export interface Container {
  name: string;
  image?: string;
  command?: string[];
  args?: string[];
  env?: { name: string; value?: string; valueFrom?: { fieldRef?: { fieldPath: string } } }[];
  resources?: { requests?: ResourceList; limits?: ResourceList };
  imagePullPolicy?: string;
  volumeMounts?: { name: string; mountPath: string; readOnly?: boolean }[];
  /** Raw block devices of Block claims: the claim's volume name and where the device appears in the container. */
  volumeDevices?: { name: string; devicePath: string }[];
}

/** One `items` entry of a configMap or secret source: the key, and the file path it goes to. */
export interface KeyToPath {
  key: string;
  path: string;
  mode?: number;
}

/** One file of a downwardAPI source (fieldRef only: the object fields the launcher pod shows). */
export interface DownwardApiVolumeFile {
  path: string;
  fieldRef?: { apiVersion?: string; fieldPath: string };
  mode?: number;
}

/** A projected volume's source (serviceAccountToken, configMap, secret or downwardAPI). */
export interface VolumeProjection {
  serviceAccountToken?: { path: string; expirationSeconds?: number; audience?: string };
  configMap?: { name: string; items?: KeyToPath[]; optional?: boolean };
  secret?: { name: string; items?: KeyToPath[]; optional?: boolean };
  downwardAPI?: { items?: DownwardApiVolumeFile[] };
}

/** A pod volume: the sources the launcher pod uses. */
export interface PodVolume {
  name: string;
  emptyDir?: { medium?: string; sizeLimit?: string };
  persistentVolumeClaim?: { claimName: string; readOnly?: boolean };
  hostPath?: { path: string; type?: string };
  configMap?: { name: string; items?: KeyToPath[]; optional?: boolean; defaultMode?: number };
  secret?: { secretName: string; items?: KeyToPath[]; optional?: boolean; defaultMode?: number };
  downwardAPI?: { items?: DownwardApiVolumeFile[]; defaultMode?: number };
  projected?: { sources: VolumeProjection[]; defaultMode?: number };
  /** An OCI image's files, read only (the kubelet's ImageVolume, GA in Kubernetes 1.36). */
  image?: { reference: string; pullPolicy?: "Always" | "IfNotPresent" | "Never" };
}

/** A pod condition. */
export interface PodCondition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
  lastTransitionTime?: string | null;
  lastProbeTime?: string | null;
}

/** A container status (readiness and termination). */
export interface ContainerStatus {
  name: string;
  ready?: boolean;
  restartCount?: number;
  image?: string;
  state?: {
    waiting?: { reason?: string; message?: string };
    running?: { startedAt?: string };
    terminated?: { exitCode?: number; reason?: string; message?: string };
  };
}

/** core/v1 Pod. */
export interface Pod extends KubeObject {
  spec?: {
    containers: Container[];
    nodeName?: string;
    nodeSelector?: Record<string, string>;
    affinity?: unknown;
    tolerations?: unknown[];
    schedulerName?: string;
    priorityClassName?: string;
    serviceAccountName?: string;
    automountServiceAccountToken?: boolean;
    imagePullSecrets?: { name: string }[];
    terminationGracePeriodSeconds?: number;
    restartPolicy?: string;
    hostname?: string;
    subdomain?: string;
    volumes?: PodVolume[];
  };
  status?: {
    phase?: "Pending" | "Running" | "Succeeded" | "Failed" | "Unknown";
    conditions?: PodCondition[];
    containerStatuses?: ContainerStatus[];
    podIP?: string;
    hostIP?: string;
    reason?: string;
    message?: string;
  };
}

/** core/v1 Node. */
export interface Node extends KubeObject {
  spec?: { unschedulable?: boolean; taints?: { key: string; value?: string; effect: string }[] };
  status?: {
    conditions?: PodCondition[];
    addresses?: { type: string; address: string }[];
    allocatable?: ResourceList;
    capacity?: ResourceList;
  };
}

/** A PersistentVolumeClaim: what the controllers read of it. */
export interface PersistentVolumeClaim extends KubeObject {
  spec?: {
    accessModes?: string[];
    volumeMode?: string;
    storageClassName?: string;
    volumeName?: string;
    resources?: { requests?: ResourceList };
  };
  status?: { phase?: string; accessModes?: string[]; capacity?: ResourceList };
}

/** The core/v1 resource types. */
export const CORE_V1 = {
  pods: { group: "", version: "v1", plural: "pods", kind: "Pod", namespaced: true },
  nodes: { group: "", version: "v1", plural: "nodes", kind: "Node", namespaced: false },
  events: { group: "", version: "v1", plural: "events", kind: "Event", namespaced: true },
  namespaces: { group: "", version: "v1", plural: "namespaces", kind: "Namespace", namespaced: false },
  persistentVolumeClaims: {
    group: "",
    version: "v1",
    plural: "persistentvolumeclaims",
    kind: "PersistentVolumeClaim",
    namespaced: true,
  },
  leases: { group: "coordination.k8s.io", version: "v1", plural: "leases", kind: "Lease", namespaced: true },
  secrets: { group: "", version: "v1", plural: "secrets", kind: "Secret", namespaced: true },
  configMaps: { group: "", version: "v1", plural: "configmaps", kind: "ConfigMap", namespaced: true },
  serviceAccounts: { group: "", version: "v1", plural: "serviceaccounts", kind: "ServiceAccount", namespaced: true },
  services: { group: "", version: "v1", plural: "services", kind: "Service", namespaced: true },
  persistentVolumes: {
    group: "",
    version: "v1",
    plural: "persistentvolumes",
    kind: "PersistentVolume",
    namespaced: false,
  },
  endpointSlices: {
    group: "discovery.k8s.io",
    version: "v1",
    plural: "endpointslices",
    kind: "EndpointSlice",
    namespaced: true,
  },
  storageClasses: {
    group: "storage.k8s.io",
    version: "v1",
    plural: "storageclasses",
    kind: "StorageClass",
    namespaced: false,
  },
} as const;
