/**
 * Test and bench support (never imported by production code): polling until a condition holds, against real clocks
 * (integration tests, e2e, benches). Tests never sleep for a fixed time (KubeVirt's `Eventually`).
 */
import { inspect } from "node:util";

/** What {@link eventually} treats as "not yet": `fn` may return one of these instead of throwing. */
export type NotYet = undefined | null | false;

/** Options for {@link eventually}. */
export interface EventuallyOptions {
  /** Give up after this long, in milliseconds; default 20 000. */
  readonly timeoutMs?: number;
  /** Pause between attempts, in milliseconds; default 50. */
  readonly intervalMs?: number;
  /** What is awaited, for the timeout message: `"the VMI to be Running"`. */
  readonly what?: string;
}

/** `R` unless it resolves to nothing: an assertion-only callback ends with `return true`, or it would poll forever. */
// biome-ignore lint/suspicious/noConfusingVoidType: detecting a callback declared to return nothing is the point.
type MustReturn<R> = [Awaited<R>] extends [void]
  ? "eventually(fn): fn must return a value (end with `return true`)"
  : R;

/**
 * Calls `fn` until it returns (or resolves to) a value that is not `undefined`, `null` or `false`, and returns that
 * value. A throw (a failed `expect`, a 404) also counts as "not yet". After `timeoutMs` it throws an Error naming
 * what was awaited, with the last error as its `cause` and its message appended.
 *
 * `fn` must return something: a callback that only asserts ends with `return true` (a type error otherwise).
 */
export async function eventually<R>(
  fn: () => MustReturn<R>,
  options: EventuallyOptions = {},
): Promise<Exclude<Awaited<R>, NotYet>> {
  const timeoutMs = options.timeoutMs ?? 20_000;
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      // The type guard hides that fn may return a promise: call it as what it is at run time.
      const value = (await (fn as () => unknown)()) as Awaited<R>;
      if (value !== undefined && value !== null && value !== false) return value as Exclude<Awaited<R>, NotYet>;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline) {
      const what = options.what ? ` waiting for ${options.what}` : "";
      const why = last === undefined ? "" : `: ${last instanceof Error ? last.message : inspect(last)}`;
      throw new Error(`Timed out after ${timeoutMs} ms${what}${why}`, { cause: last });
    }
    await new Promise((resolve) => setTimeout(resolve, options.intervalMs ?? 50));
  }
}
