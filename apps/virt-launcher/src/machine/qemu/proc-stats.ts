/** Per-thread CPU time and process memory from /proc (Linux), for the stats of a QEMU process. */
import { readFileSync } from "node:fs";

const CLK_TCK = 100;

/** CPU seconds (user + system) a thread of `pid` has used, or 0 when it is gone. */
export function threadCpuSeconds(pid: number, tid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[11]) + Number(fields[12])) / CLK_TCK;
  } catch {
    return 0;
  }
}

/** Resident set size of `pid` in bytes, or undefined when unknown. */
export function residentBytes(pid: number): number | undefined {
  try {
    const m = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) * 1024 : undefined;
  } catch {
    return undefined;
  }
}
