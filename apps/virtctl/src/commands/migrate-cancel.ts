/**
 * `virtctl migrate-cancel VM [--dry-run]`: there is no cancel subresource; like KubeVirt, list the VMIMs labelled
 * `kubevirt.io/vmi-name=<VM>` and delete the first one that is not final (its finalizer keeps it until the
 * migration has been aborted).
 */
import { errorMessage } from "@kvt/kube";
import { type Command, CommandError, DRY_RUN_FLAG, dryRunOption } from "../cli/command.ts";
import { kubevirtPath } from "../kube/paths.ts";

interface Migration {
  metadata: { name: string };
  status?: { phase?: string };
}

/** The `migrate-cancel` command. */
export const migrateCancelCommand: Command = {
  name: "migrate-cancel",
  use: "migrate-cancel (VM)",
  short: "Cancel migration of a virtual machine.",
  example: "  # Migrate-Cancel a virtual machine called 'myvm':\n  virtctl migrate-cancel myvm",
  flags: { "dry-run": DRY_RUN_FLAG },
  args: 1,
  async run(input, ctx) {
    const [name = ""] = input.args;
    const client = ctx.client();
    let items: Migration[];
    try {
      const list = (await client.request({
        method: "GET",
        path: kubevirtPath(client.namespace, "virtualmachineinstancemigrations"),
        query: { labelSelector: `kubevirt.io/vmi-name==${name}` },
      })) as { items?: Migration[] };
      items = list.items ?? [];
    } catch (error) {
      throw new CommandError(`Error fetching virtual machine instance migration list  ${errorMessage(error)}`, {
        cause: error,
      });
    }
    const active = items.find((m) => m.status?.phase !== "Succeeded" && m.status?.phase !== "Failed");
    if (!active) throw new CommandError(`Found no migration to cancel for ${name}`);
    const dryRun = dryRunOption(input, ctx);
    try {
      await client.request({
        method: "DELETE",
        path: kubevirtPath(client.namespace, "virtualmachineinstancemigrations", active.metadata.name),
        body: { apiVersion: "v1", kind: "DeleteOptions", ...(dryRun ? { dryRun } : {}) },
      });
    } catch (error) {
      throw new CommandError(
        `Error canceling migration ${active.metadata.name} of a VirtualMachine ${name}: ${errorMessage(error)}`,
        { cause: error },
      );
    }
    ctx.stdout.write(`VM ${name} was scheduled to migrate-cancel\n`);
  },
};
