/** `virtctl migrate VM [--addedNodeSelector k=v,...] [--dry-run]`: PUT the VM's `migrate` subresource. */
import { errorMessage } from "@kvt/kube";
import { type Command, CommandError, DRY_RUN_FLAG, dryRunOption } from "../cli/command.ts";
import { vmSubresource } from "../kube/paths.ts";
import { tracedRequest } from "../kube/trace-context.ts";

/** Parses pflag's StringToString syntax `k=v,k2=v2`. */
export function parseStringMap(raw: string, flag: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const pair of raw.split(",").filter((p) => p.length > 0)) {
    const at = pair.indexOf("=");
    if (at <= 0)
      throw new CommandError(`invalid argument "${raw}" for "--${flag}" flag: ${pair} must be formatted as key=value`);
    out[pair.slice(0, at)] = pair.slice(at + 1);
  }
  return out;
}

/** The `migrate` command. */
export const migrateCommand: Command = {
  name: "migrate",
  use: "migrate (VM)",
  short: "Migrate a virtual machine.",
  example: "  # Migrate a virtual machine called 'myvm':\n  virtctl migrate myvm",
  flags: {
    addedNodeSelector: {
      type: "string",
      help: "configure an additional node selector for the one-off migration attempt, as key=value1,key2=value2. AddedNodeSelector can only restrict constraints already set on the VM. By default the scheduler is responsible for finding the best Node, which is the recommended way of migrating VMs.",
    },
    "dry-run": DRY_RUN_FLAG,
  },
  args: 1,
  async run(input, ctx) {
    const [name = ""] = input.args;
    const raw = input.values.addedNodeSelector;
    const selector = typeof raw === "string" ? parseStringMap(raw, "addedNodeSelector") : undefined;
    const client = ctx.client();
    const dryRun = dryRunOption(input, ctx);
    try {
      // The migration's trace starts here when virtctl's tracing is configured (OTEL_* variables).
      await tracedRequest(
        client,
        {
          method: "PUT",
          path: vmSubresource(client.namespace, name, "migrate"),
          body: { ...(selector ? { addedNodeSelector: selector } : {}), ...(dryRun ? { dryRun } : {}) },
        },
        "migrate VirtualMachine",
        { "k8s.namespace.name": client.namespace, "kubevirt.vm.name": name },
      );
    } catch (error) {
      throw new CommandError(`Error migrating VirtualMachine ${errorMessage(error)}`, { cause: error });
    }
    ctx.stdout.write(`VM ${name} was scheduled to migrate\n`);
  },
};
