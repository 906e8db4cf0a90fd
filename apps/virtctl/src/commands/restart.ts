/** `virtctl restart VM [--force --grace-period=0] [--dry-run]`: PUT the VM's `restart` subresource (RestartOptions). */
import type { Command } from "../cli/command.ts";
import { FORCE_FLAG, forcedGracePeriod, GRACE_PERIOD_FLAG } from "./force-flags.ts";
import { vmStateChangeCommand } from "./vm-state-change.ts";

/** The `restart` command. */
export const restartCommand: Command = vmStateChangeCommand({
  action: "restart",
  short: "Restart a virtual machine.",
  flags: { force: FORCE_FLAG, "grace-period": GRACE_PERIOD_FLAG },
  request(input) {
    const grace = forcedGracePeriod(input);
    return grace === undefined
      ? { body: {}, errorPrefix: "error restarting VirtualMachine: " }
      : { body: { gracePeriodSeconds: grace }, errorPrefix: "error force restarting VirtualMachine: " };
  },
});
