/**
 * The demo image's SSH server, from Debian packages only: dropbear (`dropbear-bin`) and OpenSSH's `sftp-server`
 * (what `scp` speaks by default since OpenSSH 9), with the shared libraries they load (program-files.ts).
 *
 *   image files: /usr/sbin/dropbear, /usr/bin/dropbearkey, /usr/lib/sftp-server (dropbear's compiled-in SFTP path),
 *                their libraries (ld.so, libc, libcrypt, libtomcrypt, libtommath, libgmp, libz)
 */
import type { ImageProgram } from "./program-files.ts";

/** The packages the server and its libraries come from (the libraries are dropbear's and sftp-server's Depends). */
export const SSH_SERVER_PACKAGES = [
  "dropbear-bin",
  "openssh-sftp-server",
  "libc6",
  "libcrypt1",
  "libtomcrypt1",
  "libtommath1",
  "libgmp10",
  "zlib1g",
] as const;

/** The server's programs: [path in its package, path in the image]. */
export const SSH_SERVER_PROGRAMS: readonly ImageProgram[] = [
  ["usr/sbin/dropbear", "usr/sbin/dropbear"],
  ["usr/bin/dropbearkey", "usr/bin/dropbearkey"],
  ["usr/lib/openssh/sftp-server", "usr/lib/sftp-server"],
];
