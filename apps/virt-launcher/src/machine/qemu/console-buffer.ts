/** A bounded scrollback of console output: keeps the last `capacity` bytes for clients that attach late. */
export class ConsoleScrollback {
  readonly #capacity: number;
  #chunks: Uint8Array[] = [];
  #size = 0;

  constructor(capacity = 256 * 1024) {
    this.#capacity = capacity;
  }

  /** Appends output, dropping the oldest bytes beyond the capacity. */
  push(chunk: Uint8Array): void {
    this.#chunks.push(chunk);
    this.#size += chunk.length;
    while (this.#size > this.#capacity && this.#chunks.length > 0) {
      const first = this.#chunks[0];
      if (first === undefined) break;
      const excess = this.#size - this.#capacity;
      if (first.length <= excess) {
        this.#chunks.shift();
        this.#size -= first.length;
      } else {
        this.#chunks[0] = first.subarray(excess);
        this.#size -= excess;
      }
    }
  }

  /** A copy of the kept bytes, oldest first. */
  snapshot(): Uint8Array {
    const out = new Uint8Array(this.#size);
    let off = 0;
    for (const c of this.#chunks) {
      out.set(c, off);
      off += c.length;
    }
    return out;
  }
}
