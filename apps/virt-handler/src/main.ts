#!/usr/bin/env node
/** virt-handler: composition root. Node agent: runs this node's VirtualMachineInstances through their launchers and reports their status. */
import { main } from "@kvt/runtime";
import pkg from "../package.json" with { type: "json" };

await main({
  name: "virt-handler",
  version: pkg.version,
  summary: "Node agent: runs this node's VirtualMachineInstances through their launchers and reports their status.",
  usage: "--node-name NAME [--kubeconfig FILE]",
  flags: { kubeconfig: { type: "string" } },
  async run() {
    process.stderr.write("virt-handler: not built yet (issue 9); see --help\n");
    return 1;
  },
});
