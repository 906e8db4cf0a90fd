/**
 * A follower of a file that another process appends to and rotates: the guest console log that virt-tail copies to
 * its container's output (the release's launcher image, and the local process-kubelet's built-in virt-tail).
 */
import { closeSync, existsSync, fstatSync, openSync, readSync, statSync, watch, writeSync } from "node:fs";
import { dirname } from "node:path";

/**
 * Copies what is appended to `file` (which may not exist yet) into `fd`, from `startOffset`, until stop() (which
 * closes `fd`). Follows the file by name, as virt-tail does with ReOpen: when `file` is replaced (renamed away by a
 * rotation) the old one is read to its end first; when it is truncated, copying restarts at its beginning. A write
 * to `fd` that fails (a full disk) drops that data; it never throws.
 */
export function followFile(file: string, fd: number, startOffset = 0): () => void {
  let src: { fd: number; ino: number } | undefined;
  let offset = startOffset;
  let stopped = false;
  const buf = Buffer.alloc(64 * 1024);

  const drain = (from: number): void => {
    for (;;) {
      const n = readSync(from, buf, 0, buf.length, offset);
      if (n <= 0) return;
      offset += n;
      try {
        writeSync(fd, buf.subarray(0, n));
      } catch {
        // The destination is full or gone: this part of the log is lost, the copy goes on.
      }
    }
  };
  const close = (): void => {
    if (src) closeSync(src.fd);
    src = undefined;
  };
  const pump = (): void => {
    if (stopped) return;
    try {
      const current = existsSync(file) ? statSync(file) : undefined;
      if (src && current?.ino !== src.ino) {
        drain(src.fd); // what the old file got before it was replaced
        close();
        offset = 0;
      }
      if (!src && current) {
        const opened = openSync(file, "r");
        src = { fd: opened, ino: fstatSync(opened).ino };
      }
      if (!src) return;
      if (fstatSync(src.fd).size < offset) offset = 0; // truncated in place
      drain(src.fd);
    } catch {
      // The file changed under us between two calls: the next round sees the new state.
      close();
    }
  };

  const timer = setInterval(pump, 250);
  let watcher: ReturnType<typeof watch> | undefined;
  try {
    watcher = watch(dirname(file), () => pump());
  } catch {
    // Watching is an optimisation over the 250 ms poll; without it the copy is only slower.
  }
  pump();
  return () => {
    pump();
    stopped = true;
    clearInterval(timer);
    watcher?.close();
    close();
    closeSync(fd);
  };
}
