#!/usr/bin/env node
/** virt-launcher: composition root. Owns one VirtualMachineInstance's guest: the VMM, its console and its migration data path. */
import { main } from "@kvt/runtime";
import pkg from "../package.json" with { type: "json" };

await main({
  name: "virt-launcher",
  version: pkg.version,
  summary: "Owns one VirtualMachineInstance's guest: the VMM, its console and its migration data path.",
  usage: "--vmi FILE --socket PATH",
  flags: { kubeconfig: { type: "string" } },
  async run() {
    process.stderr.write("virt-launcher: not built yet (issue 9); see --help\n");
    return 1;
  },
});
