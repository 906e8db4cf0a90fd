#!/usr/bin/env node
/** virtctl: composition root. Command-line client for KubeVirt virtual machines. */
import { main } from "@kvt/runtime";
import pkg from "../package.json" with { type: "json" };

await main({
  name: "virtctl",
  version: pkg.version,
  summary: "Command-line client for KubeVirt virtual machines: start, stop, restart, migrate, console, pause.",
  usage: "COMMAND [NAME] [flags]",
  details: ["Commands:", "  version   print the client version"],
  flags: { kubeconfig: { type: "string" }, namespace: { type: "string", short: "n" } },
  async run({ positionals }) {
    const [command] = positionals;
    if (command === "version") {
      process.stdout.write(`Client Version: version.Info{GitVersion:"v${pkg.version}"}\n`);
      return 0;
    }
    process.stderr.write(`virtctl: unknown command "${command ?? ""}"; run "virtctl --help"\n`);
    return 1;
  },
});
