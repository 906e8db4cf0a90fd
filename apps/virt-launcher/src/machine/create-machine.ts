/**
 * Builds the guest's Machine with the backend chosen for it. The choice (KubeVirt's `useEmulation`: never / when
 * needed / always) belongs to backend-choice.ts (issue 7); until it lands every guest goes to the native VMM, whose
 * adapter lives in ./native/ once libs/vmm exports its Vm. A backend that is not built in fails the sync with
 * `Unavailable` and a message saying so, never with a pretend guest.
 */
import { LauncherRpcError } from "@kvt/launcher-rpc";
import type { Logger } from "@kvt/observability";
import type { BuiltMachine } from "../domain/domain-manager.ts";
import type { MachineSpec } from "./machine.ts";

/** Creates (does not start) the machine for `spec`. */
export type MachineFactory = (spec: MachineSpec) => Promise<BuiltMachine>;

/** The launcher's machine factory for this build. */
export function machineFactory(logger: Logger): MachineFactory {
  return async (spec) => {
    logger.info(
      { vmi: spec.vmiKey, pvmSafe: spec.boot.pvmSafe },
      "choosing the native backend (no backend choice yet)",
    );
    throw new LauncherRpcError(
      "Unavailable",
      "the native VMM backend is not built into this launcher yet (libs/vmm exports no Vm)",
    );
  };
}
