/**
 * Fencing: at most one launcher per VirtualMachineInstance on a node. A launcher takes an exclusive lock named after
 * its VMI's uid before it creates any guest, and holds it for its whole life; a second launcher for the same VMI on
 * the same node (a kubelet that started the pod's container twice, a duplicate pod) cannot take it and exits before
 * it starts a guest.
 *
 *   <socket dir>/locks/<vmi uid>.lock      socket dir: the node-wide directory virt-handler lists (a hostPath on
 *                                          a real node), so every launcher of the node sees the same file
 *
 * Why node:sqlite: the lock must be released by the kernel when its holder dies, even by SIGKILL (a POSIX fcntl or
 * flock lock, never a pid file), and the same source must run on Node 24 and Deno 2. Neither runtime exposes fcntl
 * or flock, but both ship node:sqlite, whose locks are fcntl byte-range locks on the database file: a connection in
 * `locking_mode=EXCLUSIVE` that has written once keeps its EXCLUSIVE lock until it closes or the process dies, and
 * another connection's `BEGIN EXCLUSIVE` fails at once with SQLITE_BUSY (busy_timeout 0). The native addon would
 * need libs/vmm loaded in every launcher (QEMU launchers do not load it) for three lines of C. `journal_mode=MEMORY`
 * keeps SQLite from leaving a journal file beside the lock.
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";

/** Another live process holds the lock of this VMI on this node. */
export class VmiLockedError extends Error {
  override readonly name = "VmiLockedError";
  /** The VMI uid whose lock is held. */
  readonly vmiUid: string;
  /** The lock file. */
  readonly path: string;

  constructor(vmiUid: string, path: string, options?: ErrorOptions) {
    super(
      `Cannot start a guest for VirtualMachineInstance ${vmiUid}: another virt-launcher on this node holds its lock "${path}"`,
      options,
    );
    this.vmiUid = vmiUid;
    this.path = path;
  }
}

/** A held VMI lock. */
export interface VmiLock {
  /** The lock file. */
  readonly path: string;
  /** Releases the lock (the process ending releases it too). */
  release(): void;
}

/** The lock file of `vmiUid` under `socketDir`. */
export function vmiLockPath(socketDir: string, vmiUid: string): string {
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(vmiUid)) throw new TypeError(`Invalid VMI uid for a lock name: "${vmiUid}"`);
  return join(socketDir, "locks", `${vmiUid}.lock`);
}

/**
 * Takes the exclusive lock of `vmiUid` on this node, or throws {@link VmiLockedError} at once when another process
 * holds it. Call before creating any guest; keep the returned lock for the launcher's whole life.
 */
export function acquireVmiLock(socketDir: string, vmiUid: string): VmiLock {
  const path = vmiLockPath(socketDir, vmiUid);
  mkdirSync(join(socketDir, "locks"), { recursive: true, mode: 0o700 });
  const db = new DatabaseSync(path, { timeout: 0 });
  try {
    db.exec("PRAGMA locking_mode = EXCLUSIVE; PRAGMA journal_mode = MEMORY;");
    // The write transaction takes the EXCLUSIVE lock; in exclusive locking mode it is kept after COMMIT.
    db.exec("BEGIN EXCLUSIVE; COMMIT;");
  } catch (error) {
    db.close();
    if (/locked|busy/i.test((error as Error).message)) throw new VmiLockedError(vmiUid, path, { cause: error });
    throw error;
  }
  let held = true;
  return {
    path,
    release() {
      if (!held) return;
      held = false;
      db.close();
    },
  };
}
