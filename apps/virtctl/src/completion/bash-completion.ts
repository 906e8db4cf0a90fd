// biome-ignore-all lint/suspicious/noTemplateCurlyInString: shell script text, where ${...} is the shell's
/**
 * `virtctl completion bash`: a bash completion script (bash 4+, no bash-completion package needed). It finds the
 * subcommand as virtctl does (the first word that is neither a flag nor a global flag's value), then offers
 * subcommands, the subcommand's flags plus the global ones, a flag's known values, files for `--kubeconfig`, and the
 * words of a first argument (`pause vm|vmi`).
 */
import { COMPLETED_PROGRAMS, type CompletionFlag, type CompletionModel, spellings } from "./completion-model.ts";

/** Quotes `s` for a bash single-quoted word. */
function q(s: string): string {
  return `'${s.replaceAll("'", `'\\''`)}'`;
}

function valueFlags(flags: readonly CompletionFlag[]): string {
  return flags
    .filter((f) => f.takesValue)
    .flatMap(spellings)
    .join(" ");
}

function allFlags(flags: readonly CompletionFlag[]): string {
  return flags.flatMap(spellings).join(" ");
}

/** A `case` over the subcommand that echoes `pick(command)`. */
function perCommand(model: CompletionModel, pick: (c: CompletionModel["commands"][number]) => string): string[] {
  return ['  case "$1" in', ...model.commands.map((c) => `    ${q(c.name)}) echo ${q(pick(c))} ;;`), "  esac"];
}

/** A `case` over a flag spelling that echoes its known values. */
function flagValues(model: CompletionModel): string[] {
  const lines = ['  case "$1 $2" in'];
  for (const c of [{ name: "*", flags: model.globals }, ...model.commands]) {
    for (const f of c.flags) {
      if (f.values.length === 0) continue;
      const pattern = spellings(f)
        .map((s) => `${c.name === "*" ? "*" : q(c.name)}' '${s}`)
        .join("|");
      lines.push(`    ${pattern}) echo ${q(f.values.join(" "))} ;;`);
    }
  }
  lines.push("  esac");
  return lines;
}

/** The bash script for `model`. */
export function bashCompletion(model: CompletionModel): string {
  const globals = allFlags(model.globals);
  const fileFlags = model.globals
    .filter((f) => f.file)
    .flatMap(spellings)
    .join("|");
  return [
    "# bash completion for virtctl and the kubectl-virt plugin.",
    "# This shell:      source <(virtctl completion bash)",
    "# Every new shell: virtctl completion bash > ~/.local/share/bash-completion/completions/virtctl",
    "",
    "__virtctl_flags() {",
    ...perCommand(model, (c) => allFlags(c.flags)),
    "}",
    "",
    "__virtctl_value_flags() {",
    ...perCommand(model, (c) => valueFlags(c.flags)),
    "}",
    "",
    "__virtctl_arg_words() {",
    ...perCommand(model, (c) => c.argWords.join(" ")),
    "}",
    "",
    "__virtctl_flag_values() {",
    ...flagValues(model),
    "}",
    "",
    "_virtctl() {",
    '  local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"',
    `  local commands=${q(model.commands.map((c) => c.name).join(" "))}`,
    `  local globals=${q(globals)} global_values=${q(valueFlags(model.globals))}`,
    '  local cmd="" nargs=0 i word values',
    "  COMPREPLY=()",
    "  for ((i = 1; i < COMP_CWORD; i++)); do",
    '    word="${COMP_WORDS[i]}"',
    '    if [[ " $global_values $(__virtctl_value_flags "$cmd") " == *" $word "* ]]; then',
    "      ((i++))",
    '    elif [[ "$word" != -* ]]; then',
    '      if [[ -z "$cmd" ]]; then cmd="$word"; else ((nargs++)); fi',
    "    fi",
    "  done",
    `  case "$prev" in`,
    `    ${fileFlags || "--kubeconfig"}) COMPREPLY=($(compgen -f -- "$cur")); return 0 ;;`,
    "  esac",
    '  if [[ " $global_values $(__virtctl_value_flags "$cmd") " == *" $prev "* ]]; then',
    '    values="$(__virtctl_flag_values "$cmd" "$prev")"',
    '    [[ -n "$values" ]] && COMPREPLY=($(compgen -W "$values" -- "$cur"))',
    "    return 0",
    "  fi",
    '  if [[ "$cur" == -* ]]; then',
    '    COMPREPLY=($(compgen -W "$(__virtctl_flags "$cmd") $globals" -- "$cur"))',
    '  elif [[ -z "$cmd" ]]; then',
    '    COMPREPLY=($(compgen -W "$commands" -- "$cur"))',
    "  elif ((nargs == 0)); then",
    '    COMPREPLY=($(compgen -W "$(__virtctl_arg_words "$cmd")" -- "$cur"))',
    "  fi",
    "  return 0",
    "}",
    "",
    `complete -F _virtctl ${COMPLETED_PROGRAMS.join(" ")}`,
    "",
  ].join("\n");
}
