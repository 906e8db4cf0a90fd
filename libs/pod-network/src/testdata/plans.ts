/**
 * The pod-network plans the tests wire, plumb and hand over: KubeVirt's default masquerade network (10.0.2.0/24,
 * gateway .1, the guest .2) and a bridge binding, for a VMI named vm1.
 */
import type { BridgePlan } from "../bridge-plan.ts";
import type { MasqueradePlan } from "../masquerade-plan.ts";

/** The masquerade plan of interface "default"; `overrides` change a field (another MAC, forwarded ports). */
export function masqueradePlan(overrides: Partial<MasqueradePlan> = {}): MasqueradePlan {
  return {
    name: "default",
    model: "virtio",
    mac: "02:00:00:aa:bb:cc",
    gateway: "10.0.2.1",
    guestIp: "10.0.2.2",
    prefixLength: 24,
    hostname: "vm1",
    ...overrides,
  };
}

/** The bridge plan of interface "default". */
export const bridgePlan: BridgePlan = {
  binding: "bridge",
  name: "default",
  model: "virtio",
  index: 0,
  hostname: "vm1",
};
