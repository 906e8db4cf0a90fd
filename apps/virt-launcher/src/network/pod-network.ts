/**
 * The VMI's binding of the pod network, whichever it is: `masquerade` (masquerade-plan.ts: NAT to the pod IP,
 * migratable) or `bridge` (bridge-plan.ts: the guest takes the pod IP). Other bindings (SR-IOV, passt, plugins)
 * get no NIC from this launcher. planPodNetwork() is pure; wirePodNetwork() runs in the pod's network namespace.
 */
import type { VirtualMachineInstance } from "@kvt/api";
import type { Logger } from "@kvt/observability";
import { type BridgePlan, isBridgePlan, planBridge } from "./bridge-plan.ts";
import type { DhcpServer } from "./dhcp-server.ts";
import { type MasqueradePlan, planMasquerade } from "./masquerade-plan.ts";

/** The launcher's plan for the pod interface. */
export type PodNetworkPlan = MasqueradePlan | BridgePlan;

/** The pod interface's plan, or undefined when it has none or a binding this launcher does not wire. */
export function planPodNetwork(vmi: VirtualMachineInstance): PodNetworkPlan | undefined {
  return planMasquerade(vmi) ?? planBridge(vmi);
}

/** A wired binding: the tap for the guest's NIC, its MAC, and the guest's addresses as status.interfaces shows them. */
export interface WiredPodNetwork {
  readonly tap: string;
  readonly mac: string;
  /** The pod's IPs for status.interfaces (bridge: the addresses it handed to the guest); undefined: POD_IP. */
  readonly ipAddresses?: readonly string[];
  readonly dhcp?: DhcpServer;
  close(): Promise<void>;
}

/** Wires `plan` in this process's network namespace (the pod's). Rejects with a PodNetworkWiringError. */
export async function wirePodNetwork(plan: PodNetworkPlan, log: Logger): Promise<WiredPodNetwork> {
  if (isBridgePlan(plan)) {
    const { wireBridge } = await import("./bridge.ts");
    return wireBridge(plan, log);
  }
  const { wireMasquerade } = await import("./masquerade.ts");
  return wireMasquerade(plan, log);
}
