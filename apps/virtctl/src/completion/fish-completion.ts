/**
 * `virtctl completion fish`: `complete` rules for `virtctl` and `kubectl-virt`. A helper function finds the
 * subcommand as virtctl does (skipping global flags and their values), so `virtctl -n ns st<Tab>` still offers
 * subcommands and each subcommand's flags appear only after it.
 */
import { COMPLETED_PROGRAMS, type CompletionFlag, type CompletionModel } from "./completion-model.ts";

/** Quotes `s` for a fish single-quoted word. */
function q(s: string): string {
  return `'${s.replaceAll("\\", "\\\\").replaceAll("'", "\\'")}'`;
}

function flagRule(flag: CompletionFlag, condition: string | undefined): string {
  const parts = ["complete -c $prog"];
  if (condition) parts.push(`-n ${q(condition)}`);
  parts.push(`-l ${flag.name}`);
  if (flag.short) parts.push(`-s ${flag.short}`);
  // -x: a value is required and it is not a file (-r alone would offer files too).
  if (flag.takesValue) parts.push(flag.file ? "-r -F" : "-x");
  if (flag.values.length > 0) parts.push(`-a ${q(flag.values.join(" "))}`);
  parts.push(`-d ${q(flag.help)}`);
  return parts.join(" ");
}

/** The fish script for `model`. */
export function fishCompletion(model: CompletionModel): string {
  const globalValueFlags = model.globals
    .filter((f) => f.takesValue)
    .flatMap((f) => (f.short ? [`--${f.name}`, `-${f.short}`] : [`--${f.name}`]));
  const rules: string[] = ["  complete -c $prog -f", ...model.globals.map((f) => `  ${flagRule(f, undefined)}`)];
  for (const c of model.commands) {
    rules.push(`  complete -c $prog -n '__virtctl_command ""' -a ${q(c.name)} -d ${q(c.help)}`);
    for (const f of c.flags) rules.push(`  ${flagRule(f, `__virtctl_command ${c.name}`)}`);
    if (c.argWords.length > 0) {
      rules.push(`  complete -c $prog -n '__virtctl_command ${c.name} 0' -a ${q(c.argWords.join(" "))}`);
    }
  }
  return [
    "# fish completion for virtctl and the kubectl-virt plugin.",
    "# This shell:      virtctl completion fish | source",
    "# Every new shell: virtctl completion fish > ~/.config/fish/completions/virtctl.fish",
    "",
    "# True when the subcommand typed so far is $argv[1] ('' for none yet) and, given $argv[2], when that many",
    "# arguments follow it.",
    "function __virtctl_command",
    "  set -l tokens (commandline -opc)",
    "  set -e tokens[1]",
    '  set -l cmd ""',
    "  set -l nargs 0",
    "  set -l skip 0",
    "  for t in $tokens",
    "    if test $skip = 1",
    "      set skip 0",
    "    else if contains -- $t " + globalValueFlags.join(" "),
    "      set skip 1",
    "    else if string match -q -- '-*' $t",
    "      continue",
    '    else if test -z "$cmd"',
    "      set cmd $t",
    "    else",
    "      set nargs (math $nargs + 1)",
    "    end",
    "  end",
    '  test "$cmd" = "$argv[1]"; or return 1',
    "  set -q argv[2]; and test $nargs = $argv[2]",
    "  or not set -q argv[2]",
    "end",
    "",
    `for prog in ${COMPLETED_PROGRAMS.join(" ")}`,
    ...rules,
    "end",
    "",
  ].join("\n");
}
