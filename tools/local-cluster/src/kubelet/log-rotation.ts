/**
 * Container log files with a size cap, as a kubelet rotates them (containerLogMaxSize, default 10Mi), and a
 * follower that survives the rotation of the file it copies.
 *
 * A process container writes its stdout/stderr straight into `<pod dir>/<name>.log` through a descriptor opened
 * with O_APPEND (so it keeps logging while the kubelet restarts), which a rename cannot redirect. So the kubelet
 * rotates by copy-and-truncate (logrotate's copytruncate):
 *
 *   size(<name>.log) > maxBytes  -->  copy to <name>.log.1 (replacing the previous one), truncate <name>.log to 0
 *                                     (the writer's next O_APPEND write lands at offset 0 of the same file)
 *
 * At most 2 x maxBytes (plus what is written during one check interval) per container; lines written between the
 * copy and the truncation are lost, as with copytruncate. `kubectl logs` serves the current file, as a kubelet does.
 */
import {
  closeSync,
  copyFileSync,
  existsSync,
  fstatSync,
  openSync,
  readSync,
  renameSync,
  statSync,
  truncateSync,
  watch,
  writeSync,
} from "node:fs";
import { dirname } from "node:path";

/** The kubelet's default containerLogMaxSize (10Mi). */
export const CONTAINER_LOG_MAX_BYTES = 10 * 1024 * 1024;

/** Rotates `path` when it is larger than `maxBytes`; true when it did. Never throws (a full disk skips a round). */
export function rotateLog(path: string, maxBytes = CONTAINER_LOG_MAX_BYTES): boolean {
  try {
    if (!existsSync(path) || statSync(path).size <= maxBytes) return false;
    const rotated = `${path}.1`;
    const tmp = `${rotated}.tmp`;
    copyFileSync(path, tmp);
    renameSync(tmp, rotated);
    truncateSync(path, 0);
    return true;
  } catch {
    // No space for the copy (or the file went away): the file stays as it is until the next round.
    return false;
  }
}

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
