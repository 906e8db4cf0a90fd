/** `virtctl stop VM [--grace-period N --force] [--dry-run]`: PUT the VM's `stop` subresource. */
import { type Command, CommandError, DRY_RUN_FLAG, dryRunOption, errorText } from "../cli/command.ts";
import { vmSubresource } from "../kube/paths.ts";
import { FORCE_FLAG, forcedGracePeriod, GRACE_PERIOD_FLAG } from "./force-flags.ts";

/** The `stop` command. */
export const stopCommand: Command = {
  name: "stop",
  use: "stop (VM)",
  short: "Stop a virtual machine.",
  example: "  # Stop a virtual machine called 'myvm':\n  virtctl stop myvm",
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
        path: vmSubresource(client.namespace, name, "stop"),
        body: { ...(grace !== undefined ? { gracePeriod: grace } : {}), ...(dryRun ? { dryRun } : {}) },
      });
    } catch (error) {
      const what = grace !== undefined ? "error force stopping VirtualMachine: " : "error stopping VirtualMachine ";
      throw new CommandError(`${what}${errorText(error)}`);
    }
    ctx.stdout.write(`VM ${name} was scheduled to stop\n`);
  },
};
