#!/usr/bin/env node
/** virtctl: composition root. Command-line client for KubeVirt virtual machines. */
import { runVirtctl } from "./cli/cli.ts";
import { COMMANDS } from "./commands/index.ts";

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

const code = await runVirtctl(process.argv.slice(2), COMMANDS, {
  stdin: process.stdin,
  stdout: process.stdout,
  stderr: process.stderr,
  env: process.env,
  signal: controller.signal,
});
process.stdout.write("", () => process.exit(code));
