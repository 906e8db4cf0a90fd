/**
 * virtctl's front door: split global flags (kubectl's `--kubeconfig`, `--context`, `-n/--namespace`,
 * `-s/--server`) from the subcommand and its flags, answer `--help`, run the command, map errors to exit codes:
 * 0 success, 1 any failure (KubeVirt's virtctl returns 1 for every error, usage errors included). A failure to reach
 * the API server or to be accepted by it prints one line saying what to check (kube/connection-error.ts).
 */
import { type ParseArgsConfig, parseArgs } from "node:util";
import { loadKubeConfig } from "@kvt/kube";
import { RestVirtClient, type VirtClient } from "../kube/client.ts";
import { failureLine } from "../kube/connection-error.ts";
import type { Command, CommandContext, FlagDef, Stdin } from "./command.ts";

/** kubectl's connection flags: the kubeconfig file, its context, the namespace and the server address. */
export interface ConnectionFlags {
  readonly kubeconfig?: string;
  readonly context?: string;
  readonly namespace?: string;
  /** `--server`/`-s`: overrides the cluster's address. */
  readonly server?: string;
}

/** The process-facing I/O the CLI uses (injected so tests can drive it). */
export interface CliIo {
  readonly stdin: Stdin;
  readonly stdout: CommandContext["stdout"];
  readonly stderr: CommandContext["stderr"];
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly signal: AbortSignal;
  /** Overrides client creation (tests); default: the kubeconfig-based HTTP client. */
  readonly makeClient?: (flags: ConnectionFlags) => VirtClient;
}

/** kubectl's connection flags, accepted before or after the subcommand, and `--help`. */
export const GLOBAL_FLAGS: Readonly<Record<string, FlagDef>> = {
  kubeconfig: { type: "string", help: "Path to the kubeconfig file to use for CLI requests." },
  context: { type: "string", help: "The name of the kubeconfig context to use" },
  namespace: { type: "string", short: "n", help: "If present, the namespace scope for this CLI request" },
  server: { type: "string", short: "s", help: "The address and port of the Kubernetes API server" },
  help: { type: "boolean", short: "h", help: "help for this command" },
};

/** Flags given twice keep the last value, as pflag does. */
function lastValues(
  values: Record<string, string | boolean | (string | boolean)[] | undefined>,
): Record<string, string | boolean | undefined> {
  const out: Record<string, string | boolean | undefined> = {};
  for (const [k, v] of Object.entries(values)) out[k] = Array.isArray(v) ? v[v.length - 1] : v;
  return out;
}

function parseOptions(flags: Record<string, FlagDef>): NonNullable<ParseArgsConfig["options"]> {
  const out: NonNullable<ParseArgsConfig["options"]> = {};
  for (const [name, f] of Object.entries(flags)) {
    out[name] = {
      type: f.type,
      ...(f.short ? { short: f.short } : {}),
      ...(f.multiple ? { multiple: true } : {}),
    };
  }
  return out;
}

/** Finds the subcommand: the first argument that is neither a flag nor a global flag's value. */
function findCommandName(argv: readonly string[]): string | undefined {
  const takesValue = new Set(["--kubeconfig", "--context", "--namespace", "-n", "--server", "-s"]);
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] ?? "";
    if (takesValue.has(a)) i++;
    else if (a === "--") return argv[i + 1];
    else if (!a.startsWith("-")) return a;
  }
  return undefined;
}

/** pflag accepts `--bool=true|false`; node's parseArgs does not: rewrite them. */
function normalizeBooleans(argv: readonly string[], flags: Record<string, FlagDef>): string[] {
  const out: string[] = [];
  for (const a of argv) {
    const m = /^--([^=]+)=(true|false)$/.exec(a);
    if (m?.[1] && flags[m[1]]?.type === "boolean") {
      if (m[2] === "true") out.push(`--${m[1]}`);
    } else out.push(a);
  }
  return out;
}

/**
 * pflag takes the word after a string flag as its value even when it starts with `-` (`-t "-o X"`); node's parseArgs
 * calls that ambiguous: rewrite such pairs to `--name=value`.
 */
function joinDashValues(argv: readonly string[], flags: Record<string, FlagDef>): string[] {
  const byShort = new Map(Object.entries(flags).flatMap(([name, f]) => (f.short ? [[f.short, name] as const] : [])));
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] ?? "";
    if (a === "--") {
      out.push(...argv.slice(i));
      break;
    }
    const name = a.startsWith("--") ? a.slice(2) : /^-[^-]$/.test(a) ? byShort.get(a.slice(1)) : undefined;
    const next = argv[i + 1];
    if (name && flags[name]?.type === "string" && next?.startsWith("-")) {
      out.push(`--${name}=${next}`);
      i++;
    } else out.push(a);
  }
  return out;
}

function flagLines(flags: Record<string, FlagDef>): string[] {
  return Object.entries(flags)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([name, f]) => {
      const short = f.short ? `-${f.short}, ` : "    ";
      const value = f.type === "string" ? " string" : "";
      const dflt = f.default !== undefined && f.default !== "false" ? ` (default ${f.default})` : "";
      return `  ${short}--${name}${value}`.padEnd(34) + ` ${f.help}${dflt}`;
    });
}

/** `virtctl <cmd> --help`. */
export function commandHelp(cmd: Command): string {
  const lines = [cmd.long ?? cmd.short, "", "Usage:", `  virtctl ${cmd.use} [flags]`, "", "Examples:", cmd.example, ""];
  lines.push(
    "Flags:",
    ...flagLines({ ...cmd.flags, help: { type: "boolean", short: "h", help: `help for ${cmd.name}` } }),
  );
  const { help: _help, ...globals } = GLOBAL_FLAGS;
  lines.push("", "Global flags:", ...flagLines(globals));
  return `${lines.join("\n").replace(/\n*$/, "")}\n`;
}

/** `virtctl --help`. */
export function rootHelp(commands: readonly Command[]): string {
  const width = Math.max(...commands.map((c) => c.name.length)) + 2;
  return [
    "virtctl controls virtual machine related operations on your kubernetes cluster.",
    "",
    "Available Commands:",
    ...commands.map((c) => `  ${c.name.padEnd(width)} ${c.short}`),
    "",
    "Usage:",
    "  virtctl [command]",
    "",
    "Global flags:",
    ...flagLines(GLOBAL_FLAGS),
    "",
    'Use "virtctl <command> --help" for more information about a given command.',
    "",
  ].join("\n");
}

function checkArgs(cmd: Command, args: readonly string[]): string | undefined {
  if (cmd.checkArgs) return cmd.checkArgs(args);
  const [min, max] = typeof cmd.args === "number" ? [cmd.args, cmd.args] : cmd.args;
  if (args.length >= min && args.length <= max) return undefined;
  if (min === 0 && max === 0) return `unknown command "${args[0] ?? ""}" for "virtctl ${cmd.name}"`;
  return min === max
    ? `accepts ${min} arg(s), received ${args.length}`
    : `accepts between ${min} and ${max} arg(s), received ${args.length}`;
}

/** Runs virtctl with `argv` (without the program name); resolves to the exit code. */
export async function runVirtctl(argv: readonly string[], commands: readonly Command[], io: CliIo): Promise<number> {
  const name = findCommandName(argv);
  const cmd = commands.find((c) => c.name === name);
  if (!cmd) {
    if (name === undefined || name === "help") {
      io.stdout.write(rootHelp(commands));
      return 0;
    }
    io.stderr.write(`Error: unknown command "${name}" for "virtctl"\nRun 'virtctl --help' for usage.\n`);
    return 1;
  }
  const flags = { ...GLOBAL_FLAGS, ...cmd.flags };
  let parsed: { values: Record<string, string | boolean | (string | boolean)[] | undefined>; positionals: string[] };
  try {
    parsed = parseArgs({
      args: joinDashValues(normalizeBooleans(argv, flags), flags),
      options: parseOptions(flags),
      allowPositionals: true,
      strict: true,
    });
  } catch (error) {
    io.stderr.write(`Error: ${(error as Error).message}\nRun 'virtctl ${cmd.name} --help' for usage.\n`);
    return 1;
  }
  const values = lastValues(parsed.values);
  const lists: Record<string, string[]> = {};
  for (const [name, f] of Object.entries(flags)) {
    const given = parsed.values[name];
    if (f.multiple && Array.isArray(given)) lists[name] = given.filter((v): v is string => typeof v === "string");
  }
  if (values.help === true) {
    io.stdout.write(commandHelp(cmd));
    return 0;
  }
  const args = parsed.positionals.slice(parsed.positionals.indexOf(cmd.name) + 1);
  const argError = checkArgs(cmd, args);
  if (argError) {
    io.stderr.write(`Error: ${argError}\nRun 'virtctl ${cmd.name} --help' for usage.\n`);
    return 1;
  }
  const connection: ConnectionFlags = {
    kubeconfig: typeof values.kubeconfig === "string" ? values.kubeconfig : undefined,
    context: typeof values.context === "string" ? values.context : undefined,
    namespace: typeof values.namespace === "string" ? values.namespace : undefined,
    server: typeof values.server === "string" ? values.server : undefined,
  };
  let client: VirtClient | undefined;
  const ctx: CommandContext = {
    client: () => {
      client ??= io.makeClient ? io.makeClient(connection) : defaultClient(connection, io.env);
      return client;
    },
    stdin: io.stdin,
    stdout: io.stdout,
    stderr: io.stderr,
    signal: io.signal,
  };
  try {
    await cmd.run({ args, values, lists }, ctx);
    return 0;
  } catch (error) {
    // A wrapped program (ssh, scp) failed and said why: its exit status becomes ours.
    const exitCode = (error as { exitCode?: unknown }).exitCode;
    if (typeof exitCode === "number") return exitCode;
    io.stderr.write(`${failureLine(error, client?.origin)}\n`);
    return 1;
  }
}

/** The client for `flags`, with the kubeconfig found as kubectl finds it (only `KUBECONFIG` and `HOME` of `env`). */
function defaultClient(flags: ConnectionFlags, env: CliIo["env"]): VirtClient {
  const { kubeconfig, context, server, namespace } = flags;
  const kubeConfig = loadKubeConfig({
    kubeconfig,
    context,
    server,
    env: { KUBECONFIG: env.KUBECONFIG, HOME: env.HOME },
  });
  return new RestVirtClient(kubeConfig, namespace);
}
