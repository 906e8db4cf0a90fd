/**
 * The pod network's interface and whether it lets a VMI live-migrate, as KubeVirt decides it (pkg/network/vmispec:
 * VerifyVMIMigratable): masquerade migrates; bridge only with the VMI annotation
 * `kubevirt.io/allow-pod-bridge-network-live-migration`; a VMI without interfaces or without a pod network is not
 * held back by its interfaces.
 */
import { ANNOTATION } from "../constants.ts";
import type { Interface, Network, VirtualMachineInstance } from "../types.ts";

/** The network with `pod: {}`, if any (a VMI has at most one). */
export function podNetwork(networks: readonly Network[] | undefined): Network | undefined {
  return networks?.find((n) => n.pod !== undefined && n.pod !== null);
}

/** The interface attached to the pod network, if any. */
export function podInterface(vmi: VirtualMachineInstance): Interface | undefined {
  const net = podNetwork(vmi.spec?.networks);
  return net ? vmi.spec?.domain?.devices?.interfaces?.find((i) => i.name === net.name) : undefined;
}

/** KubeVirt's message when the pod network's binding keeps a VMI from migrating (reason InterfaceNotLiveMigratable). */
export const INTERFACE_NOT_MIGRATABLE_MESSAGE = `cannot migrate VMI which does not use masquerade, bridge with ${ANNOTATION.allowPodBridgeNetworkLiveMigration} VM annotation or a migratable plugin to connect to the pod network`;

/** Why the VMI's interfaces keep it from live-migrating (KubeVirt's message), or undefined when they do not. */
export function interfacesMigrationBlocker(vmi: VirtualMachineInstance): string | undefined {
  if (!vmi.spec?.domain?.devices?.interfaces?.length) return undefined;
  const net = podNetwork(vmi.spec.networks);
  if (!net) return undefined;
  const iface = podInterface(vmi);
  if (!iface) return undefined; // no interface on the pod network: KubeVirt treats it as migratable
  if (iface.masquerade) return undefined;
  const allowBridge = vmi.metadata?.annotations?.[ANNOTATION.allowPodBridgeNetworkLiveMigration] !== undefined;
  if (iface.bridge && allowBridge) return undefined;
  return INTERFACE_NOT_MIGRATABLE_MESSAGE;
}
