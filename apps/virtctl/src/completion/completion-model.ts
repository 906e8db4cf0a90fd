/**
 * What the shell completion scripts know, taken from the command table: the subcommands with their one-line help,
 * each one's flags (long name, short alias, whether it takes a value, the values it takes) and the words offered
 * for its first argument. The scripts are static (no call back into virtctl on each Tab), so completing costs no
 * Node start-up; they complete the programs `virtctl` and `kubectl-virt` (the kubectl plugin).
 */
import { GLOBAL_FLAGS } from "../cli/cli.ts";
import type { Command, FlagDef } from "../cli/command.ts";

/** The program names the scripts register for. */
export const COMPLETED_PROGRAMS = ["virtctl", "kubectl-virt"] as const;

/** One flag as the scripts see it. */
export interface CompletionFlag {
  /** Long name, without dashes. */
  readonly name: string;
  /** One-letter alias, without the dash. */
  readonly short?: string;
  /** Whether the next word is this flag's value. */
  readonly takesValue: boolean;
  /** The values offered for it (empty: any text). */
  readonly values: readonly string[];
  /** Whether the value is a file path. */
  readonly file: boolean;
  /** One line. */
  readonly help: string;
}

/** One subcommand as the scripts see it. */
export interface CompletionCommand {
  readonly name: string;
  readonly help: string;
  readonly flags: readonly CompletionFlag[];
  /** Words for the first argument (empty: a name, nothing to offer). */
  readonly argWords: readonly string[];
}

/** Everything a script generator needs. */
export interface CompletionModel {
  /** Flags every command takes (kubectl's connection flags and `--help`). */
  readonly globals: readonly CompletionFlag[];
  readonly commands: readonly CompletionCommand[];
}

const FILE_FLAGS = new Set(["kubeconfig"]);

function toFlags(flags: Readonly<Record<string, FlagDef>>): CompletionFlag[] {
  return Object.entries(flags)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([name, f]) => ({
      name,
      ...(f.short ? { short: f.short } : {}),
      takesValue: f.type === "string",
      values: f.values ?? [],
      file: FILE_FLAGS.has(name),
      help: f.help,
    }));
}

/** Builds the model from the command table. */
export function completionModel(commands: readonly Command[]): CompletionModel {
  return {
    globals: toFlags(GLOBAL_FLAGS),
    commands: commands.map((c) => ({
      name: c.name,
      help: c.short,
      flags: toFlags(c.flags),
      argWords: c.argWords ?? [],
    })),
  };
}

/** The flag's spellings: `--name` and, when it has one, `-x`. */
export function spellings(flag: CompletionFlag): string[] {
  return flag.short ? [`--${flag.name}`, `-${flag.short}`] : [`--${flag.name}`];
}
