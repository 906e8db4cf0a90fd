// biome-ignore-all lint/suspicious/noTemplateCurlyInString: shell script text, where ${...} is the shell's
/** `virtctl completion bash|zsh|fish`: prints the shell completion script for every command. */
import type { Command } from "../cli/command.ts";
import { bashCompletion } from "../completion/bash-completion.ts";
import { completionModel } from "../completion/completion-model.ts";
import { fishCompletion } from "../completion/fish-completion.ts";
import { zshCompletion } from "../completion/zsh-completion.ts";

const SHELLS = ["bash", "zsh", "fish"] as const;

/** Builds the `completion` command; `commands` is read when it runs, so it can list itself. */
export function completionCommand(commands: () => readonly Command[]): Command {
  return {
    name: "completion",
    use: "completion bash|zsh|fish",
    short: "Print the shell completion script for bash, zsh or fish.",
    long: "Prints a script that completes virtctl's and kubectl-virt's commands, flags and flag values in the given shell.",
    example: [
      "  # Load completion into this bash shell:",
      "  source <(virtctl completion bash)",
      "  # Install it for zsh (after compinit) and fish:",
      '  virtctl completion zsh > "${fpath[1]}/_virtctl"',
      "  virtctl completion fish > ~/.config/fish/completions/virtctl.fish",
    ].join("\n"),
    flags: {},
    args: 1,
    argWords: SHELLS,
    checkArgs: (args) => {
      if (args.length !== 1) return `accepts 1 arg(s), received ${args.length}`;
      return SHELLS.includes(args[0] as (typeof SHELLS)[number])
        ? undefined
        : `unsupported shell "${args[0] ?? ""}": use one of ${SHELLS.join(", ")}`;
    },
    async run(input, ctx) {
      const model = completionModel(commands());
      const shell = input.args[0];
      const script =
        shell === "zsh" ? zshCompletion(model) : shell === "fish" ? fishCompletion(model) : bashCompletion(model);
      ctx.stdout.write(script);
    },
  };
}
