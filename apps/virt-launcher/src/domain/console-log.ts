/**
 * The guest console log (`<pod dir>/virt-serial0-log`) with a size cap, rotated as virtlogd rotates the log file
 * KubeVirt's domain XML gives the serial console (libvirt's rotating file writer with virtlogd.conf's defaults,
 * max_size 2 MiB and max_backups 3):
 *
 *   write(chunk): the part that fits under maxBytes goes to `path`; when it is full:
 *     path.(N-1) deleted, path.(i-1) -> path.i, path -> path.0, a new empty `path`; the rest goes there
 *   at most (1 + backups) x maxBytes on disk per VMI, whatever the guest prints
 *
 * The pod's guest-console-log container follows `path` by name and reopens it when it is replaced (virt-tail's
 * ReOpen). A write that fails (a full disk) drops that chunk, never the guest: `onError` hears of the first failure
 * after a success, and later chunks are tried again, so the log resumes when space returns.
 */
import { closeSync, fstatSync, openSync, renameSync, rmSync, writeSync } from "node:fs";

/** Size cap of {@link RotatingConsoleLog}. */
export interface ConsoleLogLimits {
  /** Bytes per file before it rotates (default 2 MiB, virtlogd's max_size). */
  readonly maxBytes?: number;
  /** Rotated files kept: path.0 (newest) .. path.(backups-1) (default 3, virtlogd's max_backups; 0 truncates). */
  readonly backups?: number;
}

/** virtlogd's defaults (libvirt virtlogd.conf). */
export const CONSOLE_LOG_DEFAULTS = { maxBytes: 2 * 1024 * 1024, backups: 3 } as const;

/** An append-only log file that rotates at a size cap and never throws on write. */
export class RotatingConsoleLog {
  readonly #path: string;
  readonly #maxBytes: number;
  readonly #backups: number;
  readonly #onError: (err: Error) => void;
  #fd: number | undefined;
  #size = 0;
  #failing = false;
  /** Chunks dropped because a write failed. */
  dropped = 0;

  constructor(path: string, limits: ConsoleLogLimits = {}, onError: (err: Error) => void = () => undefined) {
    this.#path = path;
    this.#maxBytes = Math.max(1, limits.maxBytes ?? CONSOLE_LOG_DEFAULTS.maxBytes);
    this.#backups = Math.max(0, limits.backups ?? CONSOLE_LOG_DEFAULTS.backups);
    this.#onError = onError;
  }

  /** Appends `chunk`, rotating when the file reaches the cap. */
  write(chunk: Uint8Array): void {
    try {
      let rest = chunk;
      while (rest.length > 0) {
        const fd = this.#open();
        if (this.#size >= this.#maxBytes) {
          this.#rotate();
          continue;
        }
        const part = rest.subarray(0, this.#maxBytes - this.#size);
        const n = writeSync(fd, part);
        this.#size += n;
        rest = rest.subarray(n);
      }
      this.#failing = false;
    } catch (err) {
      this.dropped++;
      // The descriptor may be broken (or the file gone): start from a fresh open next time.
      this.#closeFd();
      if (!this.#failing) {
        this.#failing = true;
        this.#onError(err as Error);
      }
    }
  }

  /** Closes the file (the launcher is stopping). */
  close(): void {
    this.#closeFd();
  }

  #open(): number {
    if (this.#fd === undefined) {
      this.#fd = openSync(this.#path, "a", 0o600);
      this.#size = fstatSync(this.#fd).size;
    }
    return this.#fd;
  }

  #closeFd(): void {
    if (this.#fd === undefined) return;
    try {
      closeSync(this.#fd);
    } catch {
      // Already unusable: nothing more to release.
    }
    this.#fd = undefined;
  }

  #rotate(): void {
    this.#closeFd();
    if (this.#backups === 0) {
      rmSync(this.#path, { force: true });
      return;
    }
    rmSync(`${this.#path}.${this.#backups - 1}`, { force: true });
    for (let i = this.#backups - 1; i > 0; i--) {
      try {
        renameSync(`${this.#path}.${i - 1}`, `${this.#path}.${i}`);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
      }
    }
    renameSync(this.#path, `${this.#path}.0`);
  }
}
