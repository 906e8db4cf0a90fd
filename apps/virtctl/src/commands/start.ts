/** `virtctl start VM [--paused] [--dry-run]`: PUT the VM's `start` subresource. */
import { type Command, CommandError, DRY_RUN_FLAG, dryRunOption, errorText } from "../cli/command.ts";
import { vmSubresource } from "../kube/paths.ts";

/** The `start` command. */
export const startCommand: Command = {
  name: "start",
  use: "start (VM)",
  short: "Start a virtual machine.",
  example: "  # Start a virtual machine called 'myvm':\n  virtctl start myvm",
  flags: {
    paused: { type: "boolean", help: "If set to true, start virtual machine in paused state", default: "false" },
    "dry-run": DRY_RUN_FLAG,
  },
  args: 1,
  async run(input, ctx) {
    const [name = ""] = input.args;
    const client = ctx.client();
    const dryRun = dryRunOption(input, ctx);
    try {
      await client.request({
        method: "PUT",
        path: vmSubresource(client.namespace, name, "start"),
        body: { paused: input.values.paused === true, ...(dryRun ? { dryRun } : {}) },
      });
    } catch (error) {
      throw new CommandError(`Error starting VirtualMachine ${errorText(error)}`);
    }
    ctx.stdout.write(`VM ${name} was scheduled to start\n`);
  },
};
