/**
 * The shape of one virtctl subcommand (one file each under `commands/`, like kvmtool's builtin-*.c) and the
 * context it runs in. A command throws {@link CommandError} (or any Error) to fail: the CLI prints the message on
 * stderr and exits 1, as virtctl does.
 */
import type { Writable } from "node:stream";
import type { VirtClient } from "../kube/client.ts";

/** A flag: boolean or string-valued (numbers and maps are parsed by the command). */
export interface FlagDef {
  readonly type: "boolean" | "string";
  readonly short?: string;
  /** One line for `--help`. */
  readonly help: string;
  /** Shown in `--help` as the default. */
  readonly default?: string;
  /** The values a string flag takes, offered by shell completion. */
  readonly values?: readonly string[];
  /** A string flag that may be given several times (pflag's StringArray); its values are in `lists`. */
  readonly multiple?: boolean;
}

/** Parsed input of one command. */
export interface CommandInput {
  readonly args: readonly string[];
  /** Flag values by long name (a `multiple` flag's last value). */
  readonly values: Readonly<Record<string, string | boolean | undefined>>;
  /** Every value of each `multiple` flag given, in order. */
  readonly lists?: Readonly<Record<string, readonly string[]>>;
}

/** The terminal-ish stdin the console needs. */
export interface Stdin extends NodeJS.ReadableStream {
  isTTY?: boolean;
  setRawMode?: (mode: boolean) => unknown;
}

/** What a command may use. */
export interface CommandContext {
  /** The API client (created on first use, so `--help` and argument errors need no kubeconfig). */
  client(): VirtClient;
  readonly stdin: Stdin;
  readonly stdout: Pick<Writable, "write">;
  readonly stderr: Pick<Writable, "write">;
  /** Aborted on SIGINT/SIGTERM. */
  readonly signal: AbortSignal;
}

/** One subcommand. */
export interface Command {
  /** The word users type. */
  readonly name: string;
  /** Cobra's `Use`, e.g. `start (VM)`. */
  readonly use: string;
  /** One line. */
  readonly short: string;
  /** Extra paragraph(s) for `--help`. */
  readonly long?: string;
  /** Example lines (`{{ProgramName}}` is not used: write `virtctl`). */
  readonly example: string;
  readonly flags: Readonly<Record<string, FlagDef>>;
  /** Exact number of positional arguments, or [min, max]. */
  readonly args: number | readonly [number, number];
  /** Words shell completion offers for the first argument (e.g. `vm`, `vmi`); none: it is a name. */
  readonly argWords?: readonly string[];
  /** Replaces the count check of `args` when given: the usage error for these arguments, or undefined if fine. */
  readonly checkArgs?: (args: readonly string[]) => string | undefined;
  run(input: CommandInput, ctx: CommandContext): Promise<void>;
}

/**
 * A failure whose message is printed as is (or, when it carries an `exitCode`, not printed: virtctl exits with that
 * code, as after a wrapped program that has reported its own failure). Give the client's error as `cause`: the CLI looks there for a
 * connection or credential problem and then prints what to check instead.
 */
export class CommandError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "CommandError";
  }
}

/** The dry-run flag most commands share (KubeVirt's `dryRunCommandUsage`). */
export const DRY_RUN_FLAG: FlagDef = {
  type: "boolean",
  help: "Flag used to set whether to perform a dry run or not. If true the command will be executed without performing any changes.",
  default: "false",
};

/** Prints "Dry Run execution" and returns the `dryRun` option value, as `setDryRunOption` does. */
export function dryRunOption(input: CommandInput, ctx: CommandContext): string[] | undefined {
  if (input.values["dry-run"] !== true) return undefined;
  ctx.stdout.write("Dry Run execution\n");
  return ["All"];
}

/** Parses an integer flag value or fails like pflag does. */
export function intFlag(input: CommandInput, name: string, fallback: number): number {
  const raw = input.values[name];
  if (raw === undefined || typeof raw === "boolean") return fallback;
  if (!/^-?\d+$/.test(raw))
    throw new CommandError(
      `invalid argument "${raw}" for "--${name}" flag: strconv.ParseInt: parsing "${raw}": invalid syntax`,
    );
  return Number(raw);
}
