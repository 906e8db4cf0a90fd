/** The cluster settings validation and defaulting depend on (KubeVirt CR `spec.configuration`, trimmed). */
import type { EVICTION_STRATEGIES } from "../constants.ts";
import type { DeveloperConfiguration } from "../types.ts";

/** Cluster-wide settings that change how VMs and VMIs are defaulted and validated. */
export interface ClusterConfig {
  /** Default architecture (KubeVirt: the node's, usually "amd64"). */
  architecture: string;
  /** Default machine type for amd64 ("q35"). */
  machineType: string;
  /** Default CPU model ("host-model"). */
  cpuModel: string;
  /**
   * Binding of the default pod interface (the KubeVirt CR's `network.defaultNetworkInterface`): "bridge" (KubeVirt's
   * default) or "masquerade"; KubeVirt refuses "slirp" and leaves the interface out for any other value.
   */
  defaultNetworkInterface: string;
  /** Whether bridge binding on the pod network is allowed (KubeVirt default true). */
  permitBridgeInterfaceOnPodNetwork: boolean;
  /** Cluster eviction strategy applied to VMIs that set none (KubeVirt default: unset). */
  evictionStrategy?: (typeof EVICTION_STRATEGIES)[number];
  /** VM rollout strategy; "LiveUpdate" (default) adds hotplug headroom (maxSockets, maxGuest). */
  vmRolloutStrategy: "LiveUpdate" | "Stage";
  /** Hotplug headroom multiplier (default 4). */
  maxHotplugRatio: number;
  /** The KubeVirt CR's developerConfiguration: feature gates (none: KubeVirt's defaults, alpha gates off). */
  developerConfiguration?: DeveloperConfiguration;
}

/** KubeVirt's defaults for a fresh install. */
export const DEFAULT_CLUSTER_CONFIG: Readonly<ClusterConfig> = Object.freeze({
  architecture: "amd64",
  machineType: "q35",
  cpuModel: "host-model",
  defaultNetworkInterface: "bridge",
  permitBridgeInterfaceOnPodNetwork: true,
  vmRolloutStrategy: "LiveUpdate",
  maxHotplugRatio: 4,
});
