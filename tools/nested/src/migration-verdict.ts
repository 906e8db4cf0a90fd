/**
 * The pure judgments of the nested lane's live migration (live-migration-checks.ts): does the guest's shell counter
 * continue across the move, and did the guest's clock jump by more than the downtime.
 *
 *   source console text + target console text --> "count N" lines --> N strictly +1 each line (no reset to 0, no
 *   gap, no repeat) and the target printed `minOnTarget` new ones after the source's last
 *
 *   guest `date +%s` and /proc/uptime vs the host clock when the answer arrived, before and after:
 *   jump = guest time passed - host time passed;  |jump| <= downtime + slack (+1 s for the whole-second `date`)
 *   (with KVM_CLOCK_REALTIME the guest clock runs on through the downtime: jump ~ 0; without it the guest runs
 *   behind by the downtime: jump ~ -downtime)
 */

/** The shell loop the guest runs in the background: one `count N` line a second (fits the UART's 64-byte FIFO). */
export const COUNTER_LOOP = "i=0; while :; do echo count $i; i=$((i+1)); sleep 1; done &";

/**
 * The command whose answer `T=<wall seconds> U=<uptime seconds> E` samples the guest's clocks (the trailing E marks
 * the whole line as arrived: the console matches partial lines too).
 */
export const CLOCK_PROBE = "echo T=$(date +%s) U=$(cut -d' ' -f1 /proc/uptime) E";

/** The `count N` values of the complete lines of console text, in order (a line still arriving is left out). */
export function counterValues(text: string): number[] {
  const out: number[] = [];
  for (const line of text.split("\n").slice(0, -1)) {
    // The shell's prompt or the echo of a command typed meanwhile may share the line with the background
    // loop's output (`demo:/# count 4`): the value is the line's end.
    const m = /count (\d+)$/.exec(line.trim());
    if (m) out.push(Number(m[1]));
  }
  return out;
}

/** How the counter fared across the migration. */
export interface CounterVerdict {
  readonly ok: boolean;
  /** Last value the source printed whole, first and last values printed by the target (-1 when none). */
  readonly lastOnSource: number;
  readonly firstOnTarget: number;
  readonly lastOnTarget: number;
  readonly detail: string;
}

/**
 * Judges the counter: the joined text (a line may start on the source and end on the target) must count up by
 * exactly one per line, and the target must have printed at least `minOnTarget` values after the source's last.
 */
export function judgeCounter(sourceText: string, targetText: string, minOnTarget: number): CounterVerdict {
  const source = counterValues(sourceText);
  const joined = counterValues(sourceText + targetText);
  const lastOnSource = source.at(-1) ?? -1;
  const onTarget = joined.slice(source.length);
  const firstOnTarget = onTarget[0] ?? -1;
  const lastOnTarget = onTarget.at(-1) ?? -1;
  const base = { lastOnSource, firstOnTarget, lastOnTarget };
  for (let i = 1; i < joined.length; i++) {
    const prev = joined[i - 1] ?? 0;
    const next = joined[i] ?? 0;
    if (next !== prev + 1) {
      const what = next === 0 ? "restarted at 0" : next <= prev ? "went back" : "skipped";
      return { ok: false, ...base, detail: `the counter ${what}: ${prev} then ${next}` };
    }
  }
  if (source.length === 0) return { ok: false, ...base, detail: "the source printed no count line" };
  if (onTarget.length < minOnTarget) {
    return { ok: false, ...base, detail: `the target printed ${onTarget.length} count lines, wanted ${minOnTarget}` };
  }
  return {
    ok: true,
    ...base,
    detail: `source ... ${lastOnSource}, target ${firstOnTarget} ... ${lastOnTarget} (consecutive, no reset)`,
  };
}

/** A sample of the guest's clocks against the host clock (seconds). */
export interface ClockSample {
  /** `date +%s`: the guest's wall clock, whole seconds. */
  readonly guestWall: number;
  /** /proc/uptime: the guest's monotonic clock (kvmclock), 10 ms steps. */
  readonly guestUptime: number;
  /** The host's wall clock when the answer arrived. */
  readonly hostSeconds: number;
}

/** A complete answer to CLOCK_PROBE. */
export const CLOCK_ANSWER = /^T=(\d+) U=(\d+(?:\.\d+)?) E$/;

/** The guest clocks in a `T=<date +%s> U=<uptime> E` answer; undefined when the line is not one. */
export function parseClockProbe(line: string): { guestWall: number; guestUptime: number } | undefined {
  const m = CLOCK_ANSWER.exec(line.trim());
  return m ? { guestWall: Number(m[1]), guestUptime: Number(m[2]) } : undefined;
}

/** How far the guest clocks moved against the host's between two samples, judged against the downtime. */
export interface ClockVerdict {
  readonly ok: boolean;
  /** Guest monotonic time gained minus host time passed (ms): 0 = ran on with the host, -downtime = stopped. */
  readonly uptimeJumpMs: number;
  /** The same for the wall clock; whole seconds on the guest side, so +-1000 ms of it is quantization. */
  readonly wallJumpMs: number;
  readonly detail: string;
}

/**
 * Both guest clocks must have moved like the host's within the downtime plus `slackMs` (console latency of the two
 * answers); the wall clock gets one more second for `date +%s`'s granularity.
 */
export function judgeClock(before: ClockSample, after: ClockSample, downtimeMs: number, slackMs: number): ClockVerdict {
  const hostMs = (after.hostSeconds - before.hostSeconds) * 1000;
  const uptimeJumpMs = Math.round((after.guestUptime - before.guestUptime) * 1000 - hostMs);
  const wallJumpMs = Math.round((after.guestWall - before.guestWall) * 1000 - hostMs);
  const limit = downtimeMs + slackMs;
  const ok = Math.abs(uptimeJumpMs) <= limit && Math.abs(wallJumpMs) <= limit + 1000;
  const detail =
    `over ${(hostMs / 1000).toFixed(1)} s of host time the guest's monotonic clock moved ${uptimeJumpMs} ms and its ` +
    `wall clock ${wallJumpMs} ms (whole seconds) against the host's; downtime ${Math.round(downtimeMs)} ms, ` +
    `limit ${Math.round(limit)} ms (+1000 ms for the wall clock)`;
  return { ok, uptimeJumpMs, wallJumpMs, detail };
}
