// biome-ignore-all lint/suspicious/noTemplateCurlyInString: shell script text, where ${...} is the shell's
/**
 * `virtctl completion zsh`: a native zsh completion function (`_arguments`, `_describe`) for `virtctl` and
 * `kubectl-virt`. It works sourced (`source <(virtctl completion zsh)` after `compinit`) or installed as `_virtctl`
 * in a directory of `$fpath`.
 */
import {
  COMPLETED_PROGRAMS,
  type CompletionCommand,
  type CompletionFlag,
  type CompletionModel,
} from "./completion-model.ts";

/** Quotes `s` for a zsh single-quoted word. */
function q(s: string): string {
  return `'${s.replaceAll("'", `'\\''`)}'`;
}

/** Escapes the text inside an `_arguments` `[description]` or a `_describe` `name:description`. */
function desc(s: string): string {
  return s.replaceAll("\\", "\\\\").replaceAll("[", "\\[").replaceAll("]", "\\]").replaceAll(":", "\\:");
}

/** The value part of an `_arguments` spec. */
function valueSpec(f: CompletionFlag): string {
  if (!f.takesValue) return "";
  if (f.file) return `:${f.name}:_files`;
  if (f.values.length > 0) return `:${f.name}:(${f.values.join(" ")})`;
  return `:${f.name}: `;
}

/** One `_arguments` spec (two when the flag has a short alias, as a brace pair excluding each other). */
function flagSpec(f: CompletionFlag): string {
  const help = `[${desc(f.help)}]${valueSpec(f)}`;
  const eq = f.takesValue ? "=" : "";
  if (!f.short) return q(`--${f.name}${eq}${help}`);
  const shortForm = `-${f.short}${f.takesValue ? "+" : ""}`;
  return `${q(`(-${f.short} --${f.name})`)}{${shortForm},--${f.name}${eq}}${q(help)}`;
}

function commandCase(c: CompletionCommand): string[] {
  const specs = c.flags.map(flagSpec);
  if (c.argWords.length > 0) specs.push(q(`1: :(${c.argWords.join(" ")})`));
  specs.push(q("*: :"));
  return [`    ${q(c.name)})`, `      _arguments -s $globals ${specs.join(" ")} ;;`];
}

/** The zsh script for `model`. */
export function zshCompletion(model: CompletionModel): string {
  return [
    `#compdef ${COMPLETED_PROGRAMS.join(" ")}`,
    "# zsh completion for virtctl and the kubectl-virt plugin.",
    "# This shell (after compinit): source <(virtctl completion zsh)",
    '# Every new shell: virtctl completion zsh > "${fpath[1]}/_virtctl"',
    "",
    "_virtctl() {",
    "  local -a globals commands",
    `  globals=(${model.globals.map(flagSpec).join(" ")})`,
    `  commands=(${model.commands.map((c) => q(`${desc(c.name)}:${desc(c.help)}`)).join(" ")})`,
    '  local curcontext="$curcontext" state line ret=1',
    "  _arguments -C -s $globals '1: :->command' '*:: :->args' && ret=0",
    "  case $state in",
    "    command)",
    "      _describe -t commands 'virtctl command' commands && ret=0 ;;",
    "    args)",
    '      curcontext="${curcontext%:*:*}:virtctl-$words[1]:"',
    "      case $words[1] in",
    ...model.commands.flatMap(commandCase).map((l) => `    ${l}`),
    "      esac ;;",
    "  esac",
    "  return ret",
    "}",
    "",
    'if [ "$funcstack[1]" = "_virtctl" ]; then',
    '  _virtctl "$@"',
    "else",
    `  compdef _virtctl ${COMPLETED_PROGRAMS.join(" ")}`,
    "fi",
    "",
  ].join("\n");
}
