/** `virtctl start VM [--paused] [--dry-run]`: PUT the VM's `start` subresource (StartOptions). */
import type { Command } from "../cli/command.ts";
import { vmStateChangeCommand } from "./vm-state-change.ts";

/** The `start` command. */
export const startCommand: Command = vmStateChangeCommand({
  action: "start",
  short: "Start a virtual machine.",
  flags: {
    paused: { type: "boolean", help: "If set to true, start virtual machine in paused state", default: "false" },
  },
  request: (input) => ({
    body: { paused: input.values.paused === true },
    errorPrefix: "Error starting VirtualMachine ",
  }),
});
