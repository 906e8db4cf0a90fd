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
 *
 * It copies when the file's directory reports a change (inotify), and polls besides: every 2 s while the directory
 * is watched (a missed event), every 250 ms when it cannot be. `onPump` runs after each copy (virt-tail looks for
 * the launcher's done marker there, in the same directory). A follower at rest costs no CPU between events: the pod's
 * guest-console-log container has KubeVirt's 15m CPU limit.
 */
export function followFile(
  file: string,
  fd: number,
  startOffset = 0,
  options: { readonly onPump?: () => void } = {},
): () => void {
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
    options.onPump?.();
  };

  let watcher: ReturnType<typeof watch> | undefined;
  try {
    watcher = watch(dirname(file), () => pump());
    watcher.on("error", () => undefined); // the poll goes on
  } catch {
    // Watching only makes the copy prompter than the poll; without it the poll runs more often.
  }
  const timer = setInterval(pump, watcher ? 2000 : 250);
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
