#!/usr/bin/env node
/** virt-controller: composition root. Cluster controllers for VirtualMachines, VirtualMachineInstances and migrations (leader-elected). */
import { main } from "@kvt/runtime";
import pkg from "../package.json" with { type: "json" };

await main({
  name: "virt-controller",
  version: pkg.version,
  summary: "Cluster controllers for VirtualMachines, VirtualMachineInstances and migrations (leader-elected).",
  usage: "[--kubeconfig FILE] [--metrics-port N]",
  flags: { kubeconfig: { type: "string" } },
  async run() {
    process.stderr.write("virt-controller: not built yet (issue 8); see --help\n");
    return 1;
  },
});
