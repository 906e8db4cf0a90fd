/**
 * @kvt/nested: the nested lane. A QEMU TCG host with nested SVM KVM, built from Debian packages, in which the
 * Linux-guest checks and the boot bench of our VMM run (this machine's own KVM is PVM and cannot run Linux).
 */

/** Benches of our VMM on KVM: where they run (here or in L1) and running them in L1. */
export {
  benchNeedsL1,
  HOST_FLAG,
  KVM_BENCH_AREAS,
  lastJsonLine,
  NESTED_FLAG,
  runBenchInL1,
} from "./bench-lane.ts";
/** A guest console with pattern waits (used by the jobs inside L1). */
export { type ConsoleMatch, GuestConsole } from "./guest-console.ts";
/** Build the L1 host (kernel + initramfs) from Debian packages, cached under .data/nested. */
export { buildL1Image, type L1Image, moduleLoadOrder, nestedDataDir, projectRoot } from "./l1-image.ts";
/** Boot the L1 host and run one job of the project inside it. */
export { type L1Job, type L1Result, runInL1 } from "./l1-run.ts";
/** Where the real-KVM checks run (host or nested) and running them. */
export { type LaneKind, type LaneRun, pickLane, prepareLane, runLane } from "./lane.ts";
/** Parse what the jobs report. */
export { type NestedCheck, parseBenchSamples, parseChecks } from "./results.ts";
