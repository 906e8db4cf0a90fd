#!/usr/bin/env node
/** virt-api: composition root. Admission webhooks and subresources (start, stop, restart, migrate, pause, console) for kubevirt.io/v1. */
import { main } from "@kvt/runtime";
import pkg from "../package.json" with { type: "json" };

await main({
  name: "virt-api",
  version: pkg.version,
  summary: "Admission webhooks and subresources (start, stop, restart, migrate, pause, console) for kubevirt.io/v1.",
  usage: "[--kubeconfig FILE] [--port N] [--tls-cert FILE --tls-key FILE]",
  flags: { kubeconfig: { type: "string" } },
  async run() {
    process.stderr.write("virt-api: not built yet (issue 10); see --help\n");
    return 1;
  },
});
