/**
 * `start`, `stop` and `restart` are one command shape (KubeVirt `pkg/virtctl/vm/{start,stop,restart}.go`): PUT the
 * VM's subresource with an options body, print "VM <name> was scheduled to <action>", or fail with the action's
 * error prefix. Each command file only says what differs: its flags, its body and its error wording.
 *
 * The VM may be named with a leading resource type as well (`virtctl start vm vm-cirros`, as the VirtualMachine user
 * guide writes it): with two arguments the first must be `vm`/`virtualmachine` (singular or plural), else it is
 * cobra's usage error for one argument.
 */

import { errorMessage } from "@kvt/kube";
import {
  type Command,
  CommandError,
  type CommandInput,
  DRY_RUN_FLAG,
  dryRunOption,
  type FlagDef,
} from "../cli/command.ts";
import { vmSubresource } from "../kube/paths.ts";

/** What one state-change command sends. */
export interface StateChangeRequest {
  /** The options body without `dryRun` (StartOptions, StopOptions, RestartOptions). */
  readonly body: Record<string, unknown>;
  /** Prepended to the API error, as KubeVirt's `errorFmt` (e.g. "error stopping VirtualMachine "). */
  readonly errorPrefix: string;
}

/** How one state-change command differs from the others. */
export interface StateChangeSpec {
  readonly action: "start" | "stop" | "restart";
  readonly short: string;
  /** Flags besides `--dry-run`. */
  readonly flags: Readonly<Record<string, FlagDef>>;
  /** Validates the flags and builds the request (throws CommandError on bad flags, before any API call). */
  request(input: CommandInput): StateChangeRequest;
}

const VM_TYPES = new Set(["vm", "vms", "virtualmachine", "virtualmachines"]);

/** Cobra's ExactArgs(1), also accepting `vm NAME`. */
export function checkVmNameArgs(args: readonly string[]): string | undefined {
  if (args.length === 1 || (args.length === 2 && VM_TYPES.has(args[0]?.toLowerCase() ?? ""))) return undefined;
  return `accepts 1 arg(s), received ${args.length}`;
}

/** Builds the command for `spec`. */
export function vmStateChangeCommand(spec: StateChangeSpec): Command {
  const { action } = spec;
  return {
    name: action,
    use: `${action} (VM)`,
    short: spec.short,
    example: `  # ${action[0]?.toUpperCase()}${action.slice(1)} a virtual machine called 'myvm':\n  virtctl ${action} myvm`,
    flags: { ...spec.flags, "dry-run": DRY_RUN_FLAG },
    args: [1, 2],
    checkArgs: checkVmNameArgs,
    async run(input, ctx) {
      const name = input.args.at(-1) ?? "";
      // KubeVirt's order: the client (kubeconfig errors first), "Dry Run execution", then the flag checks.
      const client = ctx.client();
      const dryRun = dryRunOption(input, ctx);
      const { body, errorPrefix } = spec.request(input);
      try {
        await client.request({
          method: "PUT",
          path: vmSubresource(client.namespace, name, action),
          body: { ...body, ...(dryRun ? { dryRun } : {}) },
        });
      } catch (error) {
        throw new CommandError(`${errorPrefix}${errorMessage(error)}`, { cause: error });
      }
      ctx.stdout.write(`VM ${name} was scheduled to ${action}\n`);
    },
  };
}
