/**
 * The serial console of a guest under test: accumulates its output and waits for a pattern (never a fixed sleep).
 *
 *   vm "serial-output" --> feed(chunk) --> text (bounded) --> waitFor(/KVT_DEMO_LINUX_BOOTED/, 60_000) -> match time
 */

/** Where a pattern was first seen. */
export interface ConsoleMatch {
  readonly line: string;
  /** Milliseconds since the console was created (the VMM start). */
  readonly atMs: number;
}

/** Console output of one guest boot, with waits on patterns. */
export class GuestConsole {
  readonly #started = performance.now();
  #text = "";
  #firstByteMs: number | undefined;
  #waiters: { re: RegExp; from: number; done: (m: ConsoleMatch) => void }[] = [];

  /** Milliseconds from creation to the first byte of output, if any arrived. */
  get firstByteMs(): number | undefined {
    return this.#firstByteMs;
  }

  /** Everything received (with carriage returns removed). */
  get text(): string {
    return this.#text;
  }

  /** Appends output and settles the waits it satisfies. */
  feed(chunk: Uint8Array): void {
    this.#firstByteMs ??= performance.now() - this.#started;
    this.#text += Buffer.from(chunk).toString("latin1").replaceAll("\r", "");
    this.#waiters = this.#waiters.filter((w) => {
      const m = this.#match(w.re, w.from);
      if (m) w.done(m);
      return !m;
    });
  }

  /** The current length of the output, to wait for something printed after this point. */
  mark(): number {
    return this.#text.length;
  }

  /** Resolves with the first line matching `re` (searching from `from`), or rejects after `timeoutMs`. */
  waitFor(re: RegExp, timeoutMs: number, from = 0): Promise<ConsoleMatch> {
    const now = this.#match(re, from);
    if (now) return Promise.resolve(now);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#waiters = this.#waiters.filter((w) => w.done !== done);
        reject(
          new Error(
            `no ${re} on the console within ${timeoutMs} ms; last output: ${JSON.stringify(this.#text.slice(-300))}`,
          ),
        );
      }, timeoutMs);
      const done = (m: ConsoleMatch): void => {
        clearTimeout(timer);
        resolve(m);
      };
      this.#waiters.push({ re, from, done });
    });
  }

  #match(re: RegExp, from: number): ConsoleMatch | undefined {
    const lines = this.#text.slice(from).split("\n");
    // The last element may be a partial line; a pattern may still match it (e.g. a prompt).
    const line = lines.find((l) => re.test(l));
    return line === undefined ? undefined : { line, atMs: performance.now() - this.#started };
  }
}
