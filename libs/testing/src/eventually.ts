/** Test and bench support (never imported by production code): polling until a condition holds (real clocks: integration tests). */

/**
 * Calls `fn` every 50 ms until it returns something other than undefined or false (errors count as "not yet"),
 * and returns that; throws after `timeoutMs`, with the last error as the cause.
 */
export async function eventually<T>(
  fn: () => Promise<T | undefined | false> | T | undefined | false,
  timeoutMs = 20_000,
): Promise<T> {
  const until = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v !== undefined && v !== false) return v;
    } catch (error) {
      last = error;
    }
    if (Date.now() > until) throw new Error(`condition not met in ${timeoutMs} ms`, { cause: last });
    await new Promise((r) => setTimeout(r, 50));
  }
}
