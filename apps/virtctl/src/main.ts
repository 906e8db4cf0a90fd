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
process.on("SIGTERM", onSignal);

const code = await runVirtctl(process.argv.slice(2), COMMANDS, {
  stdin: process.stdin,
  stdout: process.stdout,
  stderr: process.stderr,
  env: process.env,
  signal: controller.signal,
});
process.stdout.write("", () => process.exit(code));
