/** Whether a process exists, for supervisors, bring-up scripts and tests. */
import { readFileSync } from "node:fs";

/** True while process `pid` exists and is not a zombie (a zombie has exited; only its parent's wait is missing). */
export function processAlive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return false;
  }
}
