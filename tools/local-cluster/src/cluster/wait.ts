/** Polling with a deadline, for start-up checks (never for tests' correctness: they use eventually-style helpers). */

/**
 * Calls `probe` every `intervalMs` until it returns a value other than undefined/false, or throws after
 * `timeoutMs` with `what` in the message.
 */
export async function waitFor<T>(
  what: string,
  probe: () => Promise<T | undefined | false> | T | undefined | false,
  timeoutMs = 30_000,
  intervalMs = 100,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined && value !== false) return value;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() > deadline) {
      const why = lastError ? `: ${(lastError as Error).message}` : "";
      throw new Error(`Timed out after ${timeoutMs} ms waiting for ${what}${why}`, { cause: lastError });
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
