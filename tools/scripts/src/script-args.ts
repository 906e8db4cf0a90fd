/**
 * Flags of the root npm scripts (`npm start`, `npm test`, `npm run bench`, `npm run trace`), read with node:util's
 * parseArgs in strict mode plus `-h/--help`: `--help` prints the usage on stdout and exits 0; an unknown flag, a
 * missing value or a stray argument prints the problem and the usage on stderr and exits 2 (the usage-error code of
 * POSIX utilities), before the script does anything.
 */
import { type ParseArgsConfig, parseArgs } from "node:util";

/** What parseArgs returns for `T`. */
export type ScriptArgs<T extends ParseArgsConfig> = ReturnType<typeof parseArgs<T>>;

/** The outcome of {@link readScriptArgs}: the flags, or what to print and the exit code. */
export type ScriptArgsResult<T extends ParseArgsConfig> =
  | { readonly kind: "parsed"; readonly parsed: ScriptArgs<T> }
  | { readonly kind: "help"; readonly text: string; readonly code: 0 }
  | { readonly kind: "error"; readonly text: string; readonly code: 2 };

const HELP = { help: { type: "boolean", short: "h" } } as const;

/** Parses `config.args` (default: the process's arguments) without side effects; `usage` ends up in the texts. */
export function readScriptArgs<T extends ParseArgsConfig>(usage: string, config: T): ScriptArgsResult<T> {
  const usageText = `${usage.replace(/\n*$/, "")}\n`;
  let parsed: ScriptArgs<T>;
  try {
    // strict: unknown flags and values for boolean flags are refused; positionals only where the script allows them.
    parsed = parseArgs({ ...config, strict: true, options: { ...config.options, ...HELP } }) as ScriptArgs<T>;
  } catch (error) {
    return { kind: "error", code: 2, text: `${(error as Error).message}\n${usageText}` };
  }
  if ((parsed.values as Record<string, unknown>).help === true) return { kind: "help", code: 0, text: usageText };
  return { kind: "parsed", parsed };
}

/** Like {@link readScriptArgs}, but prints the help or the error and exits the process. */
export function parseScriptArgs<T extends ParseArgsConfig>(usage: string, config: T): ScriptArgs<T> {
  const result = readScriptArgs(usage, config);
  if (result.kind === "parsed") return result.parsed;
  (result.kind === "help" ? process.stdout : process.stderr).write(result.text);
  process.exit(result.code);
}

/** Exits 2 with `message` and `usage` on stderr: for checks of flag values after parsing. */
export function usageError(usage: string, message: string): never {
  process.stderr.write(`${message}\n${usage.replace(/\n*$/, "")}\n`);
  process.exit(2);
}
