/**
 * What `pause` and `unpause` share (KubeVirt `pkg/virtctl/pause`): `vm NAME` checks the VM exists, then acts on
 * the VMI of the same name; `vmi NAME` acts on the VMI directly. Both PUT the VMI's subresource.
 */

import { errorMessage, isNotFound } from "@kvt/kube";
import { type Command, type CommandContext, CommandError, type CommandInput, DRY_RUN_FLAG } from "../cli/command.ts";
import { kubevirtPath, vmiSubresource } from "../kube/paths.ts";

interface VmSpec {
  spec?: { running?: boolean; runStrategy?: string };
}

function isHalted(vm: VmSpec): boolean {
  const spec = vm.spec ?? {};
  if (spec.running !== undefined) return !spec.running;
  return (spec.runStrategy ?? "Halted") === "Halted";
}

/** Builds the `pause` or `unpause` command. */
export function pauseLikeCommand(action: "pause" | "unpause"): Command {
  const gerund = action === "pause" ? "pausing" : "unpausing";
  return {
    name: action,
    use: `${action} vm|vmi (VM)|(VMI)`,
    short: action === "pause" ? "Pause a virtual machine" : "Unpause a virtual machine",
    long:
      (action === "pause"
        ? "Pauses a virtual machine by freezing it. Machine state is kept in memory.\n"
        : "Unpauses a virtual machine.\n") +
      "First argument is the resource type, possible types are (case insensitive, both singular and plural forms) virtualmachineinstance (vmi) or virtualmachine (vm).\nSecond argument is the name of the resource.",
    example: `  # ${action === "pause" ? "Pause" : "Unpause"} a virtualmachine called 'myvm':\n  virtctl ${action} vm myvm`,
    flags: { "dry-run": DRY_RUN_FLAG },
    args: 2,
    argWords: ["vm", "vmi"],
    run: (input, ctx) => runPauseLike(action, gerund, input, ctx),
  };
}

async function runPauseLike(action: string, gerund: string, input: CommandInput, ctx: CommandContext): Promise<void> {
  const [rawType = "", name = ""] = input.args;
  const type = rawType.toLowerCase();
  const client = ctx.client();
  let dryRun: string[] | undefined;
  if (input.values["dry-run"] === true) {
    ctx.stdout.write("Dry Run execution\n");
    dryRun = ["All"];
  }
  const put = (): Promise<unknown> =>
    client.request({
      method: "PUT",
      path: vmiSubresource(client.namespace, name, action),
      body: dryRun ? { dryRun } : {},
    });
  if (type === "vm" || type === "vms" || type === "virtualmachine" || type === "virtualmachines") {
    let vm: VmSpec;
    try {
      vm = (await client.request({
        method: "GET",
        path: kubevirtPath(client.namespace, "virtualmachines", name),
      })) as VmSpec;
    } catch (error) {
      throw new CommandError(`Error getting VirtualMachine ${name}: ${errorMessage(error)}`, { cause: error });
    }
    try {
      await put();
    } catch (error) {
      if (isNotFound(error)) {
        throw new CommandError(
          isHalted(vm)
            ? `Error ${gerund} VirtualMachineInstance ${name}. VirtualMachine ${name} is not set to run`
            : `Error ${gerund} VirtualMachineInstance ${name}, it was not found`,
        );
      }
      throw new CommandError(`Error ${gerund} VirtualMachineInstance ${name}: ${errorMessage(error)}`, {
        cause: error,
      });
    }
  } else if (
    type === "vmi" ||
    type === "vmis" ||
    type === "virtualmachineinstance" ||
    type === "virtualmachineinstances"
  ) {
    try {
      await put();
    } catch (error) {
      throw new CommandError(`Error ${gerund} VirtualMachineInstance ${name}: ${errorMessage(error)}`, {
        cause: error,
      });
    }
  } else {
    throw new CommandError(`unsupported resource type: ${rawType} (use vm or vmi)`);
  }
  ctx.stdout.write(`VMI ${name} was scheduled to ${action}\n`);
}
