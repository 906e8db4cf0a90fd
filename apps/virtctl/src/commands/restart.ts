/** `virtctl restart VM [--force --grace-period=0] [--dry-run]`: PUT the VM's `restart` subresource. */
import { type Command, CommandError, DRY_RUN_FLAG, dryRunOption, errorText } from "../cli/command.ts";
import { vmSubresource } from "../kube/paths.ts";
import { FORCE_FLAG, forcedGracePeriod, GRACE_PERIOD_FLAG } from "./force-flags.ts";

/** The `restart` command. */
export const restartCommand: Command = {
  name: "restart",
  use: "restart (VM)",
  short: "Restart a virtual machine.",
  example: "  # Restart a virtual machine called 'myvm':\n  virtctl restart myvm",
  flags: { force: FORCE_FLAG, "grace-period": GRACE_PERIOD_FLAG, "dry-run": DRY_RUN_FLAG },
  args: 1,
  async run(input, ctx) {
    const [name = ""] = input.args;
    const client = ctx.client();
    const dryRun = dryRunOption(input, ctx);
    const grace = forcedGracePeriod(input);
    try {
      await client.request({
        method: "PUT",
        path: vmSubresource(client.namespace, name, "restart"),
        body: { ...(grace !== undefined ? { gracePeriodSeconds: grace } : {}), ...(dryRun ? { dryRun } : {}) },
      });
    } catch (error) {
      const what =
        grace !== undefined ? "error force restarting VirtualMachine: " : "error restarting VirtualMachine: ";
      throw new CommandError(`${what}${errorText(error)}`);
    }
    ctx.stdout.write(`VM ${name} was scheduled to restart\n`);
  },
};
