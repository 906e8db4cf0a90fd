/**
 * The seed's vm-cirros flow (e2e/lib/seed-flow.ts) on the e2e cluster: on our VMM where this host's KVM can run a
 * Linux guest, emulated (QEMU TCG, SoftwareEmulation) where it cannot, as the local cluster allows emulation.
 */
import { inject } from "vitest";
import { describeSeedVmFlow } from "../lib/seed-flow.ts";

describeSeedVmFlow("the seed's vm-cirros with kubectl and virtctl", () => inject("kubeconfig"));
