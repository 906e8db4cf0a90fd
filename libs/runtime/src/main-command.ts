/**
 * The shape every app's `main.ts` shares: parse flags, answer `--help` / `--version`, run, and turn the first
 * SIGINT/SIGTERM into an AbortSignal so the app can stop cleanly. Works the same on Node 24 and Deno 2.
 */
import { type ParseArgsConfig, parseArgs } from "node:util";

/** Flag definitions, as `node:util` parseArgs takes them. */
export type FlagSpec = NonNullable<ParseArgsConfig["options"]>;

/** What an app declares about itself. */
export interface MainCommand<F extends FlagSpec> {
  /** Program name, e.g. `virt-handler`. */
  readonly name: string;
  /** Semantic version printed by `--version` and at the top of `--help`. */
  readonly version: string;
  /** One line: what the program does. */
  readonly summary: string;
  /** One line: how to call it, without the program name, e.g. `[--node-name NAME] [--kubeconfig FILE]`. */
  readonly usage: string;
  /** Flags beyond --help and --version. */
  readonly flags: F;
  /** Extra lines for `--help` (one per flag is a good default). */
  readonly details?: readonly string[];
  /**
   * The program. `signal` aborts on the first SIGINT or SIGTERM; a second one exits at once with 130.
   * Resolves to the exit code.
   */
  run(input: ParsedInput<F>, signal: AbortSignal): Promise<number>;
}

/** Parsed flags and positionals. */
export interface ParsedInput<F extends FlagSpec> {
  readonly values: ReturnType<typeof parseArgs<{ options: F; allowPositionals: true; strict: true }>>["values"];
  readonly positionals: string[];
}

/** Which runtime runs us: "deno" or "node". */
export function runtimeName(): "deno" | "node" {
  return "Deno" in globalThis ? "deno" : "node";
}

/** The text `--help` prints. */
export function helpText<F extends FlagSpec>(cmd: MainCommand<F>): string {
  const lines = [`${cmd.name} ${cmd.version}: ${cmd.summary}`, `Usage: ${cmd.name} ${cmd.usage}`.trimEnd()];
  if (cmd.details?.length) lines.push("", ...cmd.details);
  lines.push("", "  -h, --help     print this help and exit", "  -v, --version  print the version and exit");
  return `${lines.join("\n")}\n`;
}

/**
 * Runs `cmd` with `argv` (default: the process arguments) and returns the exit code. Bad flags print the usage
 * and return 2, as Unix tools do.
 */
export async function runMainCommand<F extends FlagSpec>(
  cmd: MainCommand<F>,
  argv: string[] = process.argv.slice(2),
): Promise<number> {
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({
      args: argv,
      options: { ...cmd.flags, help: { type: "boolean", short: "h" }, version: { type: "boolean", short: "v" } },
      allowPositionals: true,
      strict: true,
    });
  } catch (error) {
    process.stderr.write(`${cmd.name}: ${(error as Error).message}\nUsage: ${cmd.name} ${cmd.usage}\n`);
    return 2;
  }
  if (parsed.values.help) {
    process.stdout.write(helpText(cmd));
    return 0;
  }
  if (parsed.values.version) {
    process.stdout.write(`${cmd.name} ${cmd.version} (${runtimeName()})\n`);
    return 0;
  }
  const controller = new AbortController();
  const onSignal = (): void => {
    if (controller.signal.aborted) process.exit(130);
    controller.abort();
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  try {
    return await cmd.run(
      { values: parsed.values as ParsedInput<F>["values"], positionals: parsed.positionals },
      controller.signal,
    );
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
  }
}

/** Runs `cmd` and exits the process with its code. The only call an app's main.ts makes. */
export async function main<F extends FlagSpec>(cmd: MainCommand<F>): Promise<never> {
  const code = await runMainCommand(cmd);
  process.exit(code);
}
