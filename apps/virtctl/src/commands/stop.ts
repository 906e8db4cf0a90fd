/** `virtctl stop VM [--grace-period N --force] [--dry-run]`: PUT the VM's `stop` subresource (StopOptions). */
import type { Command } from "../cli/command.ts";
import { FORCE_FLAG, forcedGracePeriod, GRACE_PERIOD_FLAG } from "./force-flags.ts";
import { vmStateChangeCommand } from "./vm-state-change.ts";

/** The `stop` command. */
export const stopCommand: Command = vmStateChangeCommand({
  action: "stop",
  short: "Stop a virtual machine.",
  flags: { force: FORCE_FLAG, "grace-period": GRACE_PERIOD_FLAG },
  request(input) {
    const grace = forcedGracePeriod(input);
    return grace === undefined
      ? { body: {}, errorPrefix: "error stopping VirtualMachine " }
      : { body: { gracePeriod: grace }, errorPrefix: "error force stopping VirtualMachine: " };
  },
});
