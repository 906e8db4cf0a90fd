/**
 * `eventually(fn)`: retries an assertion until it passes or the timeout expires, then throws its last error
 * (KubeVirt's Eventually). Tests never sleep for a fixed time.
 */

/** Options for {@link eventually}. */
export interface EventuallyOptions {
  /** Give up after this long; default 60 s. */
  readonly timeoutMs?: number;
  /** Pause between attempts; default 250 ms. */
  readonly intervalMs?: number;
  /** What we wait for, for the error message. */
  readonly what?: string;
}

/** Calls `fn` until it returns without throwing; returns its value. */
export async function eventually<T>(fn: () => Promise<T> | T, options: EventuallyOptions = {}): Promise<T> {
  const deadline = Date.now() + (options.timeoutMs ?? 60_000);
  let last: unknown;
  for (;;) {
    try {
      return await fn();
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline) {
      const what = options.what ? ` waiting for ${options.what}` : "";
      throw new Error(`Timed out after ${options.timeoutMs ?? 60_000} ms${what}: ${(last as Error)?.message ?? last}`, {
        cause: last,
      });
    }
    await new Promise((r) => setTimeout(r, options.intervalMs ?? 250));
  }
}
