/**
 * `virtctl expand --vm NAME | --file FILE|- [-o yaml|json]`: print a VirtualMachine with its instancetype and
 * preference expanded (KubeVirt `pkg/virtctl/vm/expand.go`), through virt-api's `virtualmachines/<name>/expand-spec`
 * (a stored VM) or `expand-vm-spec` (a VM read from a file or stdin, YAML or JSON).
 */
import { readFileSync } from "node:fs";
import { text } from "node:stream/consumers";
import { errorMessage } from "@kvt/kube";
import { parse } from "yaml";
import { type Command, CommandError } from "../cli/command.ts";
import { vmSubresource } from "../kube/paths.ts";
import { toYaml } from "./create.ts";

type Json = Parameters<typeof toYaml>[0];

/** The usage error for these flags, or undefined (KubeVirt's `expandArgs` and the mutually exclusive flags). */
export function expandFlagsError(vm: unknown, file: unknown, output: unknown): string | undefined {
  if (typeof vm === "string" && typeof file === "string") {
    return "if any flags in the group [file vm] are set none of the others can be; [file vm] were all set";
  }
  if (typeof vm !== "string" && typeof file !== "string") {
    return "error invalid arguments - VirtualMachine name or file must be provided";
  }
  if (output !== "yaml" && output !== "json") return `error not supported output format defined: ${String(output)}`;
  return undefined;
}

/** `virtctl expand`. */
export const expandCommand: Command = {
  name: "expand",
  use: "expand (VM)",
  short: "Return the VirtualMachine object with expanded instancetype and preference.",
  example: `  #Expand a virtual machine called 'myvm'.
  virtctl expand --vm myvm

  # Expand a virtual machine from file called myvm.yaml.
  virtctl expand --file myvm.yaml

  # Expand a virtual machine from stdin.
  virtctl expand --file -

  # Expand a virtual machine called myvm and display output in json format.
  virtctl expand --vm myvm --output json`,
  flags: {
    vm: {
      type: "string",
      help: 'Specify VirtualMachine name that should be expanded. Mutually exclusive with "--file" flag.',
    },
    file: {
      type: "string",
      short: "f",
      help: 'If present, the Virtual Machine spec in provided file will be expanded. Mutually exclusive with "--vm" flag.',
    },
    output: {
      type: "string",
      short: "o",
      help: "Specify a format that will be used to display output.",
      default: "yaml",
      values: ["yaml", "json"],
    },
  },
  args: 0,
  async run(input, ctx) {
    const { vm: vmName, file } = input.values;
    const output = input.values.output ?? "yaml";
    const usage = expandFlagsError(vmName, file, output);
    if (usage) throw new CommandError(usage);
    const client = ctx.client();
    const namespace = client.namespace;
    let expanded: unknown;
    if (typeof vmName === "string") {
      try {
        expanded = await client.request({ method: "GET", path: vmSubresource(namespace, vmName, "expand-spec") });
      } catch (error) {
        const msg = `error expanding VirtualMachine - ${vmName} in namespace - ${namespace}: ${errorMessage(error)}`;
        throw new CommandError(msg, { cause: error });
      }
    } else {
      let raw: string;
      try {
        raw = file === "-" ? await text(ctx.stdin) : readFileSync(String(file), "utf8");
      } catch (error) {
        throw new CommandError(`error reading file ${errorMessage(error)}`, { cause: error });
      }
      let vm: { metadata?: { name?: string } };
      try {
        vm = parse(raw) as typeof vm;
      } catch (error) {
        throw new CommandError(`error decoding VirtualMachine ${errorMessage(error)}`, { cause: error });
      }
      try {
        const path = `/apis/subresources.kubevirt.io/v1/namespaces/${encodeURIComponent(namespace)}/expand-vm-spec`;
        expanded = await client.request({ method: "PUT", path, body: vm });
      } catch (error) {
        const name = vm.metadata?.name ?? "";
        const msg = `error expanding VirtualMachine - ${name} in namespace - ${namespace}: ${errorMessage(error)}`;
        throw new CommandError(msg, { cause: error });
      }
    }
    const rendered =
      output === "json" ? JSON.stringify(expanded, null, " ") : toYaml(expanded as Json).replace(/^\n/, "");
    ctx.stdout.write(rendered.endsWith("\n") ? rendered : `${rendered}\n`);
  },
};
