/**
 * The cluster configuration as the components read it from the KubeVirt CR (KubeVirt `pkg/virt-config`): which CR
 * is in force, and the settings derived from it.
 */
import type { KubeVirt, KubeVirtConfiguration } from "../types.ts";

/**
 * The KubeVirt CR in force: the one in `namespace` (KubeVirt's install namespace) when given, else any; among several,
 * the oldest that is not being deleted (KubeVirt's operator refuses a second CR). Undefined when there is none.
 */
export function activeKubeVirt(crs: readonly KubeVirt[], namespace?: string): KubeVirt | undefined {
  return crs
    .filter((kv) => !kv.metadata?.deletionTimestamp)
    .filter((kv) => namespace === undefined || kv.metadata?.namespace === namespace)
    .sort((a, b) =>
      String(a.metadata?.creationTimestamp ?? "").localeCompare(String(b.metadata?.creationTimestamp ?? "")),
    )[0];
}

/**
 * `developerConfiguration.useEmulation`: may a VMI fall back to software emulation where KVM cannot run it? KubeVirt's
 * default is false; then launcher pods request `devices.kubevirt.io/kvm` and a node without KVM cannot take them.
 */
export function emulationAllowed(config: KubeVirtConfiguration | undefined): boolean {
  return config?.developerConfiguration?.useEmulation === true;
}

/** The KubeVirt CR's `network` settings admission acts on. */
export interface NetworkSettings {
  /** The binding of the pod interface a VMI without interfaces gets: "bridge" (KubeVirt's default), "masquerade". */
  readonly defaultNetworkInterface: string;
  /** Whether an interface may bind to the pod network with `bridge` (KubeVirt's default true). */
  readonly permitBridgeInterfaceOnPodNetwork: boolean;
}

/**
 * `spec.configuration.network` with KubeVirt's defaults (pkg/virt-config: DefaultNetworkInterface "bridge",
 * DefaultPermitBridgeInterfaceOnPodNetwork true); values of the wrong type count as unset.
 */
export function networkSettings(config: KubeVirtConfiguration | undefined): NetworkSettings {
  const network = config?.network;
  const iface: unknown = network?.defaultNetworkInterface;
  const permit: unknown = network?.permitBridgeInterfaceOnPodNetwork;
  return {
    defaultNetworkInterface: typeof iface === "string" && iface !== "" ? iface : "bridge",
    permitBridgeInterfaceOnPodNetwork: typeof permit === "boolean" ? permit : true,
  };
}
