/**
 * Reads a VMI's guest console as a user would: `kubectl logs <launcher pod> -c guest-console-log` (the container
 * KubeVirt adds to every launcher pod, whose log is the guest's serial console).
 */
import { kubectl } from "./cli.ts";
import { launcherPods } from "./objects.ts";

/** The console log of the newest launcher pod of the VMI with uid `vmiUid` ("" when none yet). */
export async function consoleLog(kubeconfig: string, vmiUid: string, pod?: string): Promise<string> {
  const name = pod ?? (await launcherPods(kubeconfig, vmiUid)).at(-1)?.metadata.name;
  if (!name) return "";
  const r = await kubectl(kubeconfig, ["logs", name, "-c", "guest-console-log"]);
  if (r.code !== 0) throw new Error(`kubectl logs ${name} -c guest-console-log: ${r.stderr.trim()}`);
  return r.stdout;
}

/**
 * The test guest's progress lines (`kvt-guest progress n=N pages=.. sum=..`), by line number. Only lines with a
 * neighbour (N-1 or N+1 also seen) count: the guest writes the UART a byte at a time, and a line garbled where a
 * migration paused it once read as n=475936 in a run that had reached 570 (CI 2026-11-27), which no later line could
 * pass.
 */
export function progressLines(log: string): Map<number, string> {
  const all = new Map<number, string>();
  for (const line of log.split("\n")) {
    const m = /\bprogress n=(\d+)\b/.exec(line) ?? /\bline[= ](\d+)\b/.exec(line);
    if (m) all.set(Number(m[1]), line.trim());
  }
  return new Map([...all].filter(([n]) => all.has(n - 1) || all.has(n + 1)));
}
