/**
 * `virtctl ssh [USER@]TYPE/NAME[/NAMESPACE] [-i KEY] [-l USER] [-p PORT] [-c COMMAND] [-t OPTS]...`: runs the local
 * OpenSSH client against a VM, as KubeVirt's current virtctl does (pkg/virtctl/ssh: the local client wrapped, not a
 * native one). The client reaches the guest through `virtctl port-forward --stdio` as its ProxyCommand, so nothing
 * but the API server needs to be reachable:
 *
 *   ssh -o 'ProxyCommand=<this virtctl> port-forward --stdio=true vmi/NAME/NAMESPACE 22' [opts] [-i KEY]
 *       USER@vmi.NAME.NAMESPACE [COMMAND]
 *
 * The host name `vmi.NAME.NAMESPACE` is what known_hosts records. ssh's exit status becomes virtctl's, so
 * `virtctl ssh -c CMD` reports the command's. `scp.ts` shares the options and the wrapper.
 */
import { spawn } from "node:child_process";
import { type Command, CommandError, type CommandInput, type FlagDef } from "../cli/command.ts";
import { type ForwardTarget, parseTarget } from "./port-forward.ts";

/** The options ssh and scp share (KubeVirt's `SSHOptions`). */
export interface SshOptions {
  readonly port: number;
  readonly username: string;
  /** Given with -i: passed on; else ssh's own defaults and agent apply. */
  readonly identityFile?: string;
  /** Given with --known-hosts: ssh's UserKnownHostsFile. */
  readonly knownHostsFile?: string;
  readonly localSshOpts: readonly string[];
}

/** The flags ssh and scp share (KubeVirt's `AddCommandlineArgs`). */
export const SSH_FLAGS: Readonly<Record<string, FlagDef>> = {
  username: {
    type: "string",
    short: "l",
    help: "--username=jdoe: Set this to the user you want to open the SSH connection as; If unassigned, this will be empty and the SSH default will apply",
  },
  "identity-file": {
    type: "string",
    short: "i",
    help: "--identity-file=/home/jdoe/.ssh/id_rsa: Set the path to a private key used for authenticating to the server; If not provided, the client will try to use the local ssh-agent at $SSH_AUTH_SOCK",
  },
  "known-hosts": {
    type: "string",
    help: "--known-hosts=/home/jdoe/.ssh/kubevirt_known_hosts: Set the path to the known_hosts file.",
  },
  port: {
    type: "string",
    short: "p",
    help: "--port=22: Specify a port on the VM to send SSH traffic to",
    default: "22",
  },
  "local-ssh-opts": {
    type: "string",
    short: "t",
    multiple: true,
    help: '--local-ssh-opts="-o StrictHostKeyChecking=no" : Additional options to be passed to the local ssh client',
  },
};

/** KubeVirt's `DefaultUsername`: $USER, $USERNAME or $LOGNAME. */
export function defaultUsername(env: Readonly<Record<string, string | undefined>> = process.env): string {
  return env.USER || env.USERNAME || env.LOGNAME || "";
}

/** The shared options from parsed flags; `username` is the target's `USER@` when it has one. */
export function sshOptions(input: CommandInput, targetUser: string | undefined): SshOptions {
  const raw = input.values.port;
  const port = typeof raw === "string" && /^\d+$/.test(raw) ? Number(raw) : raw === undefined ? 22 : Number.NaN;
  if (!(port >= 1 && port <= 65535)) {
    throw new CommandError(`invalid argument "${String(raw)}" for "-p, --port" flag: expected a port 1-65535`);
  }
  const flagUser = input.values.username;
  const identity = input.values["identity-file"];
  const knownHosts = input.values["known-hosts"];
  return {
    port,
    username: targetUser ?? (typeof flagUser === "string" ? flagUser : defaultUsername()),
    ...(typeof identity === "string" ? { identityFile: identity } : {}),
    ...(typeof knownHosts === "string" ? { knownHostsFile: knownHosts } : {}),
    localSshOpts: input.lists?.["local-ssh-opts"] ?? [],
  };
}

/** KubeVirt's ssh `ParseTarget`: `[user@]type/name[/namespace]`. */
export function parseSshTarget(arg: string): ForwardTarget & { readonly username?: string } {
  let rest = arg;
  let username: string | undefined;
  const parts = arg.split("@");
  if (parts.length > 1) {
    username = parts[0] ?? "";
    if (username === "") throw new CommandError("expected username before '@'");
    rest = parts[1] ?? "";
  }
  if (rest === "") throw new CommandError("expected target after '@'");
  return { ...parseTarget(rest), ...(username !== undefined ? { username } : {}) };
}

/** A word for a POSIX shell, single-quoted when it needs to be; `%` doubled, as ssh expands ProxyCommand's `%`s. */
function proxyWord(word: string): string {
  const escaped = word.replaceAll("%", "%%");
  return /^[\w@%+=:,./-]+$/.test(escaped) ? escaped : `'${escaped.replaceAll("'", "'\\''")}'`;
}

/** How this virtctl is run again: the runtime and the script (a Deno program needs `run -A`). */
export function selfCommand(): string[] {
  const script = process.argv[1];
  const deno = (globalThis as { Deno?: unknown }).Deno !== undefined;
  if (!script) return [process.execPath];
  return deno ? [process.execPath, "run", "-A", script] : [process.execPath, script];
}

/**
 * KubeVirt's `BuildProxyCommandOption`: `ProxyCommand=<virtctl> port-forward --stdio=true KIND/NAME/NAMESPACE PORT`,
 * with this virtctl's connection flags (`--kubeconfig`, `--context`, `--server`) carried over when given.
 */
export function proxyCommandOption(
  target: ForwardTarget,
  namespace: string,
  port: number,
  connection: Readonly<Record<string, string | boolean | undefined>> = {},
  self: readonly string[] = selfCommand(),
): string {
  const words = [...self];
  for (const flag of ["kubeconfig", "context", "server"]) {
    const value = connection[flag];
    if (typeof value === "string") words.push(`--${flag}=${value}`);
  }
  words.push("port-forward", "--stdio=true", `${target.kind}/${target.name}/${namespace}`, String(port));
  return `ProxyCommand=${words.map(proxyWord).join(" ")}`;
}

/** The host ssh connects to: `KIND.NAME.NAMESPACE`, with `USER@` when there is one. */
export function sshHost(target: ForwardTarget, namespace: string, username: string): string {
  return `${username ? `${username}@` : ""}${target.kind}.${target.name}.${namespace}`;
}

/** KubeVirt's `LocalClientCmd` arguments: the proxy, the extra options, -i, then the client's own. */
export function localClientArgs(proxyOption: string, options: SshOptions, clientArgs: readonly string[]): string[] {
  const args = ["-o", proxyOption, ...options.localSshOpts];
  if (options.knownHostsFile) args.push("-o", `UserKnownHostsFile=${options.knownHostsFile}`);
  if (options.identityFile) args.push("-i", options.identityFile);
  return [...args, ...clientArgs];
}

/** Thrown to end virtctl with the wrapped client's exit status (the client has said why already). */
export class ExitStatus extends CommandError {
  readonly exitCode: number;
  constructor(exitCode: number) {
    super(`exit status ${exitCode}`);
    this.exitCode = exitCode;
  }
}

/**
 * Runs the local `client` (ssh or scp) on this terminal and waits for it. A missing client fails naming the package;
 * a non-zero exit throws {@link ExitStatus}.
 */
export async function runLocalClient(client: "ssh" | "scp", args: readonly string[]): Promise<void> {
  const code = await new Promise<number>((resolve, reject) => {
    const child = spawn(client, args, { stdio: "inherit" });
    child.once("error", (error: NodeJS.ErrnoException) => {
      reject(
        error.code === "ENOENT"
          ? new CommandError(
              `${client} was not found on PATH: virtctl ${client} runs the local OpenSSH client; install it (Debian: apt-get install openssh-client)`,
              { cause: error },
            )
          : new CommandError(`cannot run ${client}: ${error.message}`, { cause: error }),
      );
    });
    // A signal ends ssh the way the shell reports it: 128 + the signal's number.
    child.once("exit", (exitCode, signal) => resolve(exitCode ?? (signal === "SIGINT" ? 130 : 255)));
  });
  if (code !== 0) throw new ExitStatus(code);
}

/** The `ssh` command. */
export const sshCommand: Command = {
  name: "ssh",
  use: "ssh (VM|VMI)",
  short: "Open a SSH connection to a virtual machine instance.",
  example:
    "  # Connect to 'testvmi':\n  virtctl ssh jdoe@vmi/testvmi [--identity-file]\n\n" +
    "  # Connect to 'testvm' in 'mynamespace' namespace\n  virtctl ssh jdoe@vm/testvm/mynamespace [--identity-file]\n\n" +
    "  # Specify a username and namespace:\n  virtctl ssh --namespace=mynamespace --username=jdoe vmi/testvmi",
  flags: {
    ...SSH_FLAGS,
    command: { type: "string", short: "c", help: "--command='ls /': Specify a command to execute in the VM" },
  },
  args: 1,
  async run(input, ctx) {
    const target = parseSshTarget(input.args[0] ?? "");
    const options = sshOptions(input, target.username);
    const namespace = target.namespace ?? ctx.client().namespace;
    const clientArgs = [sshHost(target, namespace, options.username)];
    const command = input.values.command;
    if (typeof command === "string" && command !== "") clientArgs.push(command);
    const proxy = proxyCommandOption(target, namespace, options.port, input.values);
    await runLocalClient("ssh", localClientArgs(proxy, options, clientArgs));
  },
};
