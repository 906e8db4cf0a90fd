/**
 * The API server's data directory is readable by its own user only: the directory 0700 and every file in it 0600
 * (the SQLite database and its -wal/-shm files hold every Secret; the CA and serving keys, the tokens and the
 * kubeconfigs are credentials). The database file is created 0600 before SQLite opens it, as SQLite gives its
 * -wal and -shm files the database file's mode; files an older version left with wider modes are narrowed.
 */
import { chmodSync, closeSync, existsSync, lstatSync, mkdirSync, openSync, readdirSync } from "node:fs";
import { join } from "node:path";

/** Mode of the data directory and of the files in it. */
export const PRIVATE_DIR_MODE = 0o700;
export const PRIVATE_FILE_MODE = 0o600;

/** Creates `dir` (0700) if missing, narrows it and its files, and creates `dbFile` in it 0600 when missing. */
export function makeDataDirPrivate(dir: string, dbFile: string): void {
  mkdirSync(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
  chmodSync(dir, PRIVATE_DIR_MODE);
  const db = join(dir, dbFile);
  if (!existsSync(db)) closeSync(openSync(db, "a", PRIVATE_FILE_MODE));
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    const st = lstatSync(p);
    if (st.isFile() && (st.mode & 0o077) !== 0) chmodSync(p, PRIVATE_FILE_MODE);
    else if (st.isDirectory() && (st.mode & 0o077) !== 0) chmodSync(p, PRIVATE_DIR_MODE);
  }
}
