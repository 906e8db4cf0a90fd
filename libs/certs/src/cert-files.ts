/**
 * Certificates kept as files (a data directory's pki/, a mounted Secret): `<name>.crt` and `<name>.key`, the key
 * readable by its owner only (0600), in a directory only its owner may enter (0700).
 */
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type CertificateAndKey, needsRenewal } from "./certs.ts";

/** Paths of one certificate and its key. */
export interface CertificateFiles {
  readonly cert: string;
  readonly key: string;
}

/** The file paths `<dir>/<name>.crt` and `<dir>/<name>.key`. */
export function certificateFiles(dir: string, name: string): CertificateFiles {
  return { cert: join(dir, `${name}.crt`), key: join(dir, `${name}.key`) };
}

/** Reads a certificate and key from `files`; undefined when either is missing. */
export function readCertificate(files: CertificateFiles): CertificateAndKey | undefined {
  if (!existsSync(files.cert) || !existsSync(files.key)) return undefined;
  return { certPem: readFileSync(files.cert, "utf8"), keyPem: readFileSync(files.key, "utf8") };
}

/** Writes a certificate (0644) and its key (0600) into `dir` (created 0700 when missing). */
export function writeCertificate(dir: string, name: string, pair: CertificateAndKey): CertificateFiles {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
  const files = certificateFiles(dir, name);
  writeFileSync(files.key, pair.keyPem, { mode: 0o600 });
  chmodSync(files.key, 0o600);
  writeFileSync(files.cert, pair.certPem, { mode: 0o644 });
  return files;
}

/**
 * Returns `<dir>/<name>.{crt,key}`, made by `make` when missing or due for renewal ({@link needsRenewal}); the
 * directory and key modes are tightened on every call, so files left by an older version are fixed too.
 */
export async function ensureCertificate(
  dir: string,
  name: string,
  make: () => Promise<CertificateAndKey>,
): Promise<CertificateFiles> {
  const files = certificateFiles(dir, name);
  const current = readCertificate(files);
  if (current && !needsRenewal(current.certPem)) {
    chmodSync(dir, 0o700);
    chmodSync(files.key, 0o600);
    return files;
  }
  return writeCertificate(dir, name, await make());
}

/** A running {@link watchFiles}; `stop()` ends it. */
export interface FileWatch {
  stop(): void;
}

/**
 * Calls `onChange` with the files' new contents whenever any of `paths` changes (read every `intervalMs`, default
 * 2 s: a Kubernetes Secret volume swaps its files through a symlink, which reading the path follows; a few small
 * reads a second cost nothing, and a renewal is served within seconds of reaching the files). Use it to pick up a
 * rotated certificate without a restart. A file that cannot be read is skipped until it can.
 */
export function watchFiles(
  paths: readonly string[],
  onChange: (contents: string[]) => void,
  intervalMs = 2000,
): FileWatch {
  const read = (): string[] | undefined => {
    try {
      return paths.map((p) => readFileSync(p, "utf8"));
    } catch {
      // Mid-swap or removed: keep the material in use and look again at the next tick.
      return undefined;
    }
  };
  let last = read()?.join("\0");
  const timer = setInterval(() => {
    const now = read();
    if (!now || now.join("\0") === last) return;
    last = now.join("\0");
    onChange(now);
  }, intervalMs);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
