/**
 * The VMI's binding of the pod network, whichever it is: `masquerade` (masquerade-plan.ts: NAT to the pod IP,
 * migratable) or `bridge` (bridge-plan.ts: the guest takes the pod IP). Other bindings (SR-IOV, passt, plugins)
 * get no NIC. planPodNetwork() is pure; plumbPodNetwork() builds the binding in a namespace (netns.ts); a launcher
 * either wires its own pod (wirePodNetwork: plumb and serve) or serves what virt-handler plumbed for it
 * (adoptPodNetwork: the handover file, plumbed.ts).
 */
import { readFile } from "node:fs/promises";
import type { VirtualMachineInstance } from "@kvt/api";
import type { Logger } from "@kvt/observability";
import { type BridgePlan, isBridgePlan, planBridge } from "./bridge-plan.ts";
import { type MasqueradePlan, planMasquerade } from "./masquerade-plan.ts";
import type { Netns } from "./netns.ts";
import {
  HandoverError,
  type PlumbedPodNetwork,
  type PlumbOptions,
  parseHandover,
  servePodNetwork,
  type WiredPodNetwork,
} from "./plumbed.ts";

/** The launcher's plan for the pod interface. */
export type PodNetworkPlan = MasqueradePlan | BridgePlan;

/** The pod interface's plan, or undefined when it has none or a binding that is not wired here. */
export function planPodNetwork(vmi: VirtualMachineInstance): PodNetworkPlan | undefined {
  return planMasquerade(vmi) ?? planBridge(vmi);
}

/** Builds `plan` in `ns` (the pod's namespace). Rejects with a PodNetworkWiringError. */
export async function plumbPodNetwork(
  plan: PodNetworkPlan,
  ns: Netns,
  log: Logger,
  options: PlumbOptions = {},
): Promise<PlumbedPodNetwork> {
  if (isBridgePlan(plan)) {
    const { plumbBridge } = await import("./bridge.ts");
    return plumbBridge(plan, ns, log, options);
  }
  const { plumbMasquerade } = await import("./masquerade.ts");
  return plumbMasquerade(plan, ns, options);
}

/** Wires `plan` in this process's network namespace (the pod's) and serves the guest's DHCP. */
export async function wirePodNetwork(plan: PodNetworkPlan, log: Logger): Promise<WiredPodNetwork> {
  if (isBridgePlan(plan)) {
    const { wireBridge } = await import("./bridge.ts");
    return wireBridge(plan, log);
  }
  const { wireMasquerade } = await import("./masquerade.ts");
  return wireMasquerade(plan, log);
}

/**
 * Serves what virt-handler plumbed for this launcher: reads the handover file (`file`) and starts the guest's DHCP
 * server. Rejects with a HandoverError when the file is missing (the handler has not wired this pod) or malformed.
 */
export async function adoptPodNetwork(plan: PodNetworkPlan, file: string, log: Logger): Promise<WiredPodNetwork> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (err) {
    throw new HandoverError(`virt-handler has not wired this pod's network (no ${file})`, { cause: err });
  }
  const plumbed = parseHandover(text);
  const wired = await servePodNetwork(plumbed, plan, log);
  log.info(
    { tap: plumbed.tap, mac: plumbed.mac, guestIp: plumbed.dhcp?.lease.ip },
    "pod network adopted from the node",
  );
  return wired;
}
