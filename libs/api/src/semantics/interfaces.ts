/**
 * The pod network's interface and whether it lets a VMI live-migrate, as KubeVirt decides it (pkg/network/vmispec:
 * VerifyVMIMigratable): masquerade and passtBinding migrate; bridge only with the VMI annotation
 * `kubevirt.io/allow-pod-bridge-network-live-migration`; a binding plugin when the KubeVirt CR declares its
 * `migration`; a VMI without interfaces or without a pod network is not held back by its interfaces.
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

/**
 * KubeVirt's message when the pod network's binding keeps a VMI from migrating (reason InterfaceNotLiveMigratable),
 * as of KubeVirt v1.8 (earlier releases named the bridge annotation in it).
 */
export const INTERFACE_NOT_MIGRATABLE_MESSAGE =
  "cannot migrate VMI which does not use masquerade or a migratable plugin to connect to the pod network";

/** The KubeVirt CR's `network.binding` plugins, as far as migration goes (a plugin with `migration` migrates). */
export type BindingPlugins = Readonly<Record<string, { readonly migration?: unknown } | undefined>>;

/**
 * Why the VMI's interfaces keep it from live-migrating (KubeVirt's message), or undefined when they do not.
 * `bindingPlugins`: the KubeVirt CR's `spec.configuration.network.binding`.
 */
export function interfacesMigrationBlocker(
  vmi: VirtualMachineInstance,
  bindingPlugins: BindingPlugins = {},
): string | undefined {
  if (!vmi.spec?.domain?.devices?.interfaces?.length) return undefined;
  const net = podNetwork(vmi.spec.networks);
  if (!net) return undefined;
  const iface = podInterface(vmi);
  if (!iface) return `no primary interface found for network ${net.name}`;
  if (iface.masquerade || iface.passtBinding) return undefined;
  const allowBridge = vmi.metadata?.annotations?.[ANNOTATION.allowPodBridgeNetworkLiveMigration] !== undefined;
  if (iface.bridge && allowBridge) return undefined;
  const plugin = iface.binding?.name ? bindingPlugins[iface.binding.name] : undefined;
  if (iface.binding && plugin?.migration) return undefined;
  return INTERFACE_NOT_MIGRATABLE_MESSAGE;
}
