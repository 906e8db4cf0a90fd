/** @kvt/pod-network: KubeVirt's masquerade and bridge bindings of the pod network, planned, plumbed and served. */

/** The bridge binding's plan (pure). */
export { type BridgePlan, isBridgePlan, planBridge } from "./bridge-plan.ts";
/** Deleting the conntrack entries whose replies come from an address (flows pinned to a pod address that moved). */
export {
  type ConntrackDeleter,
  ConntrackError,
  type ConntrackFlows,
  conntrackDeleteArgs,
  conntrackDeleter,
  deletedCount,
} from "./conntrack.ts";
/** The guest's DHCP server (UDP 67 in the pod). */
export { type DhcpServer, startDhcpServer } from "./dhcp-server.ts";
/** The masquerade binding's plan (pure) and names of the in-pod devices. */
export {
  BRIDGE,
  MasqueradeError,
  type MasqueradePlan,
  MIGRATION_PORTS,
  masqueradeRuleset,
  type NicModel,
  nicNeedsQemu,
  POD_INTERFACE,
  planMasquerade,
  TAP,
} from "./masquerade-plan.ts";
/** Where the wiring's commands run: this process's namespace or one entered through /proc/<pid>/ns/net. */
export {
  CriticalNetworkError,
  enteredNetns,
  holdsNetAdmin,
  type Netns,
  ownNetns,
  PLUMBING_PROGRAMS,
  PodNetworkWiringError,
  sysctlPath,
} from "./netns.ts";
/** The plumbing's result, handed from virt-handler to the launcher, and the DHCP serving of it. */
export {
  HANDOVER_FILE,
  HandoverError,
  type PlumbedPodNetwork,
  type PlumbOptions,
  parseHandover,
  servePodNetwork,
  type WiredPodNetwork,
} from "./plumbed.ts";
/** The binding a VMI asks for (pure), plumbing it in a namespace, and the launcher's two ways of getting it. */
export {
  adoptPodNetwork,
  type PodNetworkPlan,
  planPodNetwork,
  plumbPodNetwork,
  wirePodNetwork,
} from "./pod-network.ts";
