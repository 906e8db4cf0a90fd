/**
 * `virtctl scp [-r] [--preserve] SOURCE DESTINATION`: copies files from or to a VM with the local OpenSSH scp,
 * through `virtctl port-forward --stdio` as its ProxyCommand (KubeVirt pkg/virtctl/scp). Exactly one side is remote,
 * `[USER@]TYPE/NAME[/NAMESPACE]:PATH`:
 *
 *   scp -o 'ProxyCommand=<this virtctl> port-forward --stdio=true vmi/NAME/NAMESPACE 22' [opts] [-i KEY] [-r] [-p]
 *       LOCAL USER@vmi.NAME.NAMESPACE:PATH        (or the other way round)
 */
import { type Command, CommandError } from "../cli/command.ts";
import type { ForwardTarget } from "./port-forward.ts";
import {
  localClientArgs,
  parseSshTarget,
  proxyCommandOption,
  runLocalClient,
  SSH_FLAGS,
  sshHost,
  sshOptions,
} from "./ssh.ts";

/** The remote side of a copy. */
export interface RemoteLocation extends ForwardTarget {
  readonly username?: string;
  readonly path: string;
}

/** KubeVirt's scp `ParseTarget`: which side is remote (the one with a `:`), and its target and path. */
export function parseScpLocations(
  source: string,
  destination: string,
): { local: string; remote: RemoteLocation; toRemote: boolean } {
  const sourceRemote = source.includes(":");
  const destinationRemote = destination.includes(":");
  if (sourceRemote && destinationRemote) {
    throw new CommandError(
      `copying from a remote location to another remote location is not supported: "${source}" to "${destination}"`,
    );
  }
  if (!sourceRemote && !destinationRemote) {
    throw new CommandError(
      `none of the two provided locations seems to be a remote location: "${source}" to "${destination}"`,
    );
  }
  const toRemote = destinationRemote;
  const remoteArg = toRemote ? destination : source;
  const at = remoteArg.indexOf(":");
  const remote = { ...parseSshTarget(remoteArg.slice(0, at)), path: remoteArg.slice(at + 1) };
  return { local: toRemote ? source : destination, remote, toRemote };
}

/** The `scp` command. */
export const scpCommand: Command = {
  name: "scp",
  use: "scp (VM|VMI)",
  short: "SCP files from/to a virtual machine instance.",
  example:
    "  # Copy a file to the remote home folder of user jdoe\n  virtctl scp myfile.bin jdoe@vmi/testvmi:myfile.bin\n\n" +
    "  # Copy a directory to the remote home folder of user jdoe\n  virtctl scp --recursive ~/mydir/ jdoe@vmi/testvmi:./mydir\n\n" +
    "  # Copy a file to 'testvm' in 'mynamespace' namespace\n  virtctl scp myfile.bin jdoe@vm/testvm/mynamespace:myfile.bin\n\n" +
    "  # Copy a file from the remote location to a local folder\n  virtctl scp jdoe@vmi/testvmi:myfile.bin ~/myfile.bin",
  flags: {
    ...SSH_FLAGS,
    recursive: { type: "boolean", short: "r", help: "Recursively copy entire directories", default: "false" },
    preserve: {
      type: "boolean",
      help: "Preserves modification times, access times, and modes from the original file.",
      default: "false",
    },
  },
  args: 2,
  async run(input, ctx) {
    const { local, remote, toRemote } = parseScpLocations(input.args[0] ?? "", input.args[1] ?? "");
    const options = sshOptions(input, remote.username);
    const namespace = remote.namespace ?? ctx.client().namespace;
    const remoteArg = `${sshHost(remote, namespace, options.username)}:${remote.path}`;
    const clientArgs: string[] = [];
    if (input.values.recursive === true) clientArgs.push("-r");
    if (input.values.preserve === true) clientArgs.push("-p");
    clientArgs.push(...(toRemote ? [local, remoteArg] : [remoteArg, local]));
    const proxy = proxyCommandOption(remote, namespace, options.port, input.values);
    await runLocalClient("scp", localClientArgs(proxy, options, clientArgs));
  },
};
