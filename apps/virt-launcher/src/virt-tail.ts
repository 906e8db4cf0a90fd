#!/usr/bin/env node
/**
 * virt-tail: the launcher pod's `guest-console-log` container (KubeVirt's cmd/virt-tail). Copies the guest's serial
 * console log, which virt-launcher writes in the pod's `private` volume and rotates, to this container's stdout, so
 * `kubectl logs <pod> -c guest-console-log` shows the console. Waits for the file to appear, follows it by name
 * across rotations, and ends on SIGTERM (the kubelet's, when the pod goes away).
 *
 *   command: virt-tail --logfile /var/run/kubevirt-private/<vmi uid>/virt-serial0-log
 *
 * The release's launcher image runs it as /usr/bin/virt-tail; the local process-kubelet has it built in.
 */
import { followFile, main } from "@kvt/runtime";
import pkg from "../package.json" with { type: "json" };

await main({
  name: "virt-tail",
  version: pkg.version,
  summary: "Follows the guest's serial console log to stdout (the launcher pod's guest-console-log container).",
  usage: "--logfile FILE",
  flags: { logfile: { type: "string" } },
  async run({ values }, signal) {
    if (!values.logfile) {
      process.stderr.write("virt-tail: --logfile is required\n");
      return 2;
    }
    const stop = followFile(values.logfile, 1);
    await new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }));
    stop();
    return 0;
  },
});
