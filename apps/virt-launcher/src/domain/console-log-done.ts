/**
 * The end of a launcher, as the pod's guest-console-log container (virt-tail) learns it: KubeVirt's termFileDone,
 * `<console log>-sigTerm-done`, which virt-launcher writes beside the console log once its guest is gone (shut
 * down, crashed or migrated away) and virt-tail takes as its cue to exit 0. Without it a real kubelet keeps the pod
 * Running (virt-tail never ends) after the compute container has exited, so a migrated-away source pod never
 * completes and `kubectl drain` is refused its eviction. The process-kubelet ends its built-in virt-tail with the
 * pod's other containers, so there the marker only arrives first.
 */
import { existsSync, writeFileSync } from "node:fs";

/** The marker's path for the console log at `consoleLog`. */
export function consoleDoneMarker(consoleLog: string): string {
  return `${consoleLog}-sigTerm-done`;
}

/** Writes the marker (the launcher is done). Never throws: a launcher that cannot write it still exits. */
export function markConsoleDone(consoleLog: string): boolean {
  try {
    writeFileSync(consoleDoneMarker(consoleLog), "");
    return true;
  } catch {
    return false; // its directory is gone (the pod's volume removed): nobody follows the log any more
  }
}

/** True once the launcher whose console log is `consoleLog` has written the marker. */
export function consoleDone(consoleLog: string): boolean {
  return existsSync(consoleDoneMarker(consoleLog));
}
