/**
 * Completion as a program answers it (cobra's `__complete` protocol), for `kubectl virt <Tab>`: kubectl completes a
 * plugin by running `kubectl_complete-<plugin> ARGS... PARTIAL` and reading one candidate per line (`word<TAB>help`)
 * and a last line `:<directive>`. The installed package ships `kubectl_complete-virt` (the same file as virtctl,
 * which runs this when started under that name or as `virtctl __complete ...`). Same rules as the bash script.
 */
import type { CompletionCommand, CompletionFlag, CompletionModel } from "./completion-model.ts";
import { spellings } from "./completion-model.ts";

/** Cobra's ShellCompDirective bits used here. */
export const Directive = {
  /** Let the shell complete file names. */
  Default: 0,
  /** Offer only the candidates given. */
  NoFileComp: 4,
} as const;

/** Candidates (`word` or `word\thelp`) and the directive. */
export interface Completion {
  readonly candidates: readonly string[];
  readonly directive: number;
}

function findFlag(flags: readonly CompletionFlag[], word: string): CompletionFlag | undefined {
  return flags.find((f) => spellings(f).includes(word));
}

interface Typed {
  readonly command: CompletionCommand | undefined;
  readonly nargs: number;
  /** The flag whose value is being typed, if any. */
  readonly pendingFlag: CompletionFlag | undefined;
}

/** Reads the words before the partial one, as the CLI does: the first non-flag word is the subcommand. */
function readTyped(model: CompletionModel, words: readonly string[]): Typed {
  let command: CompletionCommand | undefined;
  let nargs = 0;
  let pendingFlag: CompletionFlag | undefined;
  for (const word of words) {
    if (pendingFlag) {
      pendingFlag = undefined;
      continue;
    }
    const flag = findFlag([...model.globals, ...(command?.flags ?? [])], word);
    if (flag) pendingFlag = flag.takesValue ? flag : undefined;
    else if (word.startsWith("-")) continue;
    else if (!command) command = model.commands.find((c) => c.name === word);
    else nargs++;
  }
  return { command, nargs, pendingFlag };
}

const described = (word: string, help: string): string => `${word}\t${help}`;

/** What to offer for `partial` after `words`. */
export function completeArgs(model: CompletionModel, args: readonly string[]): Completion {
  const partial = args.at(-1) ?? "";
  const { command, nargs, pendingFlag } = readTyped(model, args.slice(0, -1));
  const only = (candidates: string[]): Completion => ({
    candidates: candidates.filter((c) => c.startsWith(partial)),
    directive: Directive.NoFileComp,
  });
  if (pendingFlag) {
    if (pendingFlag.file) return { candidates: [], directive: Directive.Default };
    return only([...pendingFlag.values]);
  }
  if (partial.startsWith("-")) {
    const flags = [...(command?.flags ?? []), ...model.globals];
    return only(flags.flatMap((f) => spellings(f).map((s) => described(s, f.help))));
  }
  if (!command) return only(model.commands.map((c) => described(c.name, c.help)));
  return only(nargs === 0 ? [...command.argWords] : []);
}

/** The `__complete` output: candidates, then `:<directive>`. */
export function formatCompletion(completion: Completion): string {
  return [...completion.candidates, `:${completion.directive}`, ""].join("\n");
}
