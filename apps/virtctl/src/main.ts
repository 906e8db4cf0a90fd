#!/usr/bin/env node
/** virtctl: composition root. Command-line client for KubeVirt virtual machines. */
import { basename } from "node:path";
import { runVirtctl } from "./cli/cli.ts";
import { COMMANDS } from "./commands/index.ts";
import { completionModel } from "./completion/completion-model.ts";
import { completeArgs, formatCompletion } from "./completion/dynamic-completion.ts";

/** Runs the command line; resolves to the exit code. */
async function runCommandLine(argv: readonly string[]): Promise<number> {
  const controller = new AbortController();
  const onSignal = (): void => {
    if (controller.signal.aborted) process.exit(130);
    controller.abort();
  };
  process.on("SIGINT", onSignal);
  // The reader of our output went away (`virtctl console vm | grep -m1 ...`): that is a normal end.
  process.stdout.on("error", (error: NodeJS.ErrnoException) => {
    if (error.code === "EPIPE") process.exit(0);
  });
  process.on("SIGTERM", onSignal);
  return runVirtctl(argv, COMMANDS, {
    stdin: process.stdin,
    stdout: process.stdout,
    stderr: process.stderr,
    env: process.env,
    signal: controller.signal,
  });
}

const argv = process.argv.slice(2);
// kubectl completes `kubectl virt ...` by running kubectl_complete-virt (this file under that name) with the words.
const completing = basename(process.argv[1] ?? "").startsWith("kubectl_complete-") || argv[0] === "__complete";
const code = completing ? 0 : await runCommandLine(argv);
if (completing) {
  const words = argv[0] === "__complete" ? argv.slice(1) : argv;
  process.stdout.write(formatCompletion(completeArgs(completionModel(COMMANDS), words)));
}
process.stdout.write("", () => process.exit(code));
