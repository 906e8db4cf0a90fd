/** The `--force` / `--grace-period` pair `stop` and `restart` share (KubeVirt `pkg/virtctl/vm`). */
import { CommandError, type CommandInput, type FlagDef, intFlag } from "../cli/command.ts";

/** `--force` */
export const FORCE_FLAG: FlagDef = {
  type: "boolean",
  help: "Only used when grace-period=0. If true, immediately remove VMI pod from API and bypass graceful deletion. Note that immediate deletion of some resources may result in inconsistency or data loss and requires confirmation.",
  default: "false",
};

/** `--grace-period` */
export const GRACE_PERIOD_FLAG: FlagDef = {
  type: "string",
  help: "Period of time in seconds given to the VMI to terminate gracefully. Can only be set to 0 when --force is true (force deletion). Currently only setting 0 is supported.",
  default: "-1",
};

/** The grace period to send, or undefined when not forcing; both flags must be given together. */
export function forcedGracePeriod(input: CommandInput): number | undefined {
  const graceChanged = input.values["grace-period"] !== undefined;
  const force = input.values.force === true;
  if (graceChanged !== force) throw new CommandError("Must both use --force=true and set --grace-period.");
  return force ? intFlag(input, "grace-period", -1) : undefined;
}
