/**
 * The demo image's network measuring tool: Debian's iperf3 (`npm run bench -- network` runs its server in the guest),
 * with the libraries it loads (program-files.ts; libc comes with the SSH server's packages).
 *
 *   image files: /usr/bin/iperf3, libiperf.so.0, libsctp.so.1, libssl.so.3, libcrypto.so.3 (iperf3's optional RSA
 *                authentication links libcrypto: about 4.7 of the 5.7 MiB this adds)
 */
import type { ImageProgram } from "./program-files.ts";

/** The packages iperf3 and its libraries come from (iperf3's and libiperf0's Depends, libc6 aside). */
export const NET_TOOL_PACKAGES = ["iperf3", "libiperf0", "libsctp1", "libssl3"] as const;

/** The programs: [path in its package, path in the image]. */
export const NET_TOOL_PROGRAMS: readonly ImageProgram[] = [["usr/bin/iperf3", "usr/bin/iperf3"]];
