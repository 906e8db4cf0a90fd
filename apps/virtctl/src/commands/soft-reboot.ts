/** `virtctl soft-reboot VMI`: PUT the VMI's `softreboot` subresource (ACPI or guest agent inside the guest). */
import { errorMessage } from "@kvt/kube";
import { type Command, CommandError } from "../cli/command.ts";
import { vmiSubresource } from "../kube/paths.ts";

/** The `soft-reboot` command. */
export const softRebootCommand: Command = {
  name: "soft-reboot",
  use: "soft-reboot (VMI)",
  short: "Soft reboot a virtual machine instance",
  long: "Soft reboot a virtual machine instance",
  example: "  # Soft-Reboot a virtualmachineinstance called 'myvmi':\n  virtctl soft-reboot myvmi",
  flags: {},
  args: 1,
  async run(input, ctx) {
    const [name = ""] = input.args;
    const client = ctx.client();
    try {
      await client.request({ method: "PUT", path: vmiSubresource(client.namespace, name, "softreboot") });
    } catch (error) {
      throw new CommandError(`Error soft rebooting VirtualMachineInstance ${name}: ${errorMessage(error)}`, {
        cause: error,
      });
    }
    ctx.stdout.write(`VMI ${name} was scheduled to soft-reboot\n`);
  },
};
