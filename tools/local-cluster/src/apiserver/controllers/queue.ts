/**
 * A tiny level-triggered work loop for the in-process controllers: keys are marked dirty (deduplicated) and
 * processed in batches; a key whose handler asks for a retry is processed again after a delay.
 */
import type { Logger } from "pino";

/** Processes one key; returns true to retry it later. */
export type KeyHandler = (key: string) => Promise<boolean>;

/** The loop. */
export class WorkLoop {
  readonly #dirty = new Set<string>();
  readonly #handler: KeyHandler;
  readonly #logger: Logger;
  readonly #retryMs: number;
  #scheduled = false;
  #running = false;
  #stopped = false;
  readonly #timers = new Set<NodeJS.Timeout>();

  constructor(handler: KeyHandler, logger: Logger, retryMs = 200) {
    this.#handler = handler;
    this.#logger = logger;
    this.#retryMs = retryMs;
  }

  /** Marks a key for processing. */
  add(key: string): void {
    if (this.#stopped) return;
    this.#dirty.add(key);
    this.#schedule();
  }

  #schedule(): void {
    if (this.#scheduled || this.#running) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      void this.#run();
    });
  }

  async #run(): Promise<void> {
    if (this.#running || this.#stopped) return;
    this.#running = true;
    try {
      while (this.#dirty.size > 0 && !this.#stopped) {
        const keys = [...this.#dirty];
        this.#dirty.clear();
        for (const k of keys) {
          let retry = false;
          try {
            retry = await this.#handler(k);
          } catch (err) {
            this.#logger.warn({ err, key: k }, "controller step failed; retrying");
            retry = true;
          }
          if (retry && !this.#stopped) {
            const t = setTimeout(() => {
              this.#timers.delete(t);
              this.add(k);
            }, this.#retryMs);
            this.#timers.add(t);
          }
        }
      }
    } finally {
      this.#running = false;
    }
    if (this.#dirty.size > 0) this.#schedule();
  }

  /** Stops processing and cancels retries. */
  stop(): void {
    this.#stopped = true;
    for (const t of this.#timers) clearTimeout(t);
    this.#timers.clear();
  }
}
