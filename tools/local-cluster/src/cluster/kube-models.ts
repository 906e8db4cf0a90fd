/**
 * The core Kubernetes object types the scheduler, the process-kubelet, the storage controllers and the service proxy
 * read, as they travel on the wire through @kvt/kube: @kubernetes/client-node's model types (types only: nothing of
 * client-node is loaded at run time) with every `Date` a string. client-node's own deserializer turns RFC 3339
 * timestamps into `Date` objects; @kvt/kube hands over the API server's JSON as it is, so a timestamp read here is
 * a string, and one written is `date.toISOString()`.
 */
import type * as k8s from "@kubernetes/client-node";

/** `T` as JSON: `Date` fields become strings, recursively. */
export type Json<T> = T extends Date
  ? string
  : T extends readonly (infer U)[]
    ? Json<U>[]
    : T extends object
      ? { [K in keyof T]: Json<T[K]> }
      : T;

export type V1ConfigMap = Json<k8s.V1ConfigMap>;
export type V1Container = Json<k8s.V1Container>;
export type V1ContainerStatus = Json<k8s.V1ContainerStatus>;
export type V1DownwardAPIVolumeFile = Json<k8s.V1DownwardAPIVolumeFile>;
export type V1EndpointSlice = Json<k8s.V1EndpointSlice>;
export type V1KeyToPath = Json<k8s.V1KeyToPath>;
export type V1LabelSelector = Json<k8s.V1LabelSelector>;
export type V1Node = Json<k8s.V1Node>;
export type V1NodeSelectorRequirement = Json<k8s.V1NodeSelectorRequirement>;
export type V1NodeSelectorTerm = Json<k8s.V1NodeSelectorTerm>;
export type V1NodeStatus = Json<k8s.V1NodeStatus>;
export type V1PersistentVolume = Json<k8s.V1PersistentVolume>;
export type V1PersistentVolumeClaim = Json<k8s.V1PersistentVolumeClaim>;
export type V1Pod = Json<k8s.V1Pod>;
export type V1PodAffinityTerm = Json<k8s.V1PodAffinityTerm>;
export type V1PodCondition = Json<k8s.V1PodCondition>;
export type V1PodStatus = Json<k8s.V1PodStatus>;
export type V1Secret = Json<k8s.V1Secret>;
export type V1Service = Json<k8s.V1Service>;
export type V1ServiceAccount = Json<k8s.V1ServiceAccount>;
export type V1StorageClass = Json<k8s.V1StorageClass>;
export type V1Taint = Json<k8s.V1Taint>;
export type V1Toleration = Json<k8s.V1Toleration>;
export type V1Volume = Json<k8s.V1Volume>;
