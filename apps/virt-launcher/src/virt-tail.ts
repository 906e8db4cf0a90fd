#!/usr/bin/env node
/**
 * virt-tail: the launcher pod's `guest-console-log` container (KubeVirt's cmd/virt-tail). Copies the guest's serial
 * console log, which virt-launcher writes in the pod's `private` volume and rotates, to this container's stdout, so
 * `kubectl logs <pod> -c guest-console-log` shows the console. Waits for the file to appear, follows it by name
 * across rotations, and ends on SIGTERM (the kubelet's, when the pod goes away) or, as KubeVirt's, once the
 * launcher has written `<logfile>-sigTerm-done` (its guest is gone: domain/console-log-done.ts), so the pod
 * completes when its compute container has exited.
 *
 *   command: virt-tail --logfile /var/run/kubevirt-private/<vmi uid>/virt-serial0-log
 *
 * The release's launcher image runs it as /usr/bin/virt-tail; the local process-kubelet has it built in.
 */
import { followFile, main } from "@kvt/runtime";
import pkg from "../package.json" with { type: "json" };
import { consoleDone } from "./domain/console-log-done.ts";

/**
 * How long the last bytes are copied after the launcher's done marker appeared (ms): longer than the follower's 2 s
 * poll at rest, so one more pass copies what the guest printed last where no watch event comes (kube nodes).
 */
const DRAIN_MS = 2_500;

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
    const logfile = values.logfile;
    let stop: () => void = () => {};
    await new Promise<void>((resolve) => {
      signal.addEventListener("abort", () => resolve(), { once: true });
      // The launcher is done (console-log-done.ts; the marker is written beside the log, so the follower's watch of
      // that directory wakes it): copy what it wrote last, then end, so the pod can complete.
      let done = false;
      const onPump = (): void => {
        if (done || !consoleDone(logfile)) return;
        done = true;
        setTimeout(resolve, DRAIN_MS);
      };
      stop = followFile(logfile, 1, 0, { onPump });
    });
    stop();
    return 0;
  },
});
