/**
 * Forgetting flows: deleting the conntrack entries whose replies come from an address (Debian's `conntrack -D`), in
 * this process's network namespace or one entered with nsenter. The one home of that operation: the local cluster's
 * service proxy runs it when an endpoint stops serving a Service, and virt-handler when a VMI's pod address moved in a
 * live migration (apps/virt-handler/src/network/migrated-flows.ts).
 *
 *   client --> ClusterIP:80 --DNAT--> source launcher 10.N.1.5:8080       (entry: reply source 10.N.1.5)
 *   the VM migrates to 10.N.2.9; the old entry would pin the flow to an address nobody answers from
 *   conntrack -D [-p tcp --orig-dst <ClusterIP> --orig-port-dst 80] --reply-src 10.N.1.5
 *   the flow's next segment (nf_conntrack_tcp_loose picks up a flow mid-stream) meets the Service's rules again
 *
 * Beyond KubeVirt: kube-proxy deletes such entries for UDP only (a TCP server that went away answers with a reset);
 * a VM's TCP connections outlive its pod, so TCP entries are deleted too.
 */
import { spawn } from "node:child_process";
import { isIPv4 } from "node:net";

/** A request to delete conntrack entries that cannot be right (not an IPv4 address, a port out of range). */
export class ConntrackError extends Error {
  override name = "ConntrackError";
}

/** Which entries to delete: those whose reply comes from `replySource`, narrowed by the other fields when given. */
export interface ConntrackFlows {
  /** The address the flows were DNATed (or went) to: their replies' source. IPv4. */
  readonly replySource: string;
  readonly protocol?: "tcp" | "udp" | "sctp";
  /** The flows' destination before DNAT (a ClusterIP), IPv4. */
  readonly origDst?: string;
  /** The destination port before DNAT (a Service port); only with `protocol`. */
  readonly origDstPort?: number;
}

/** `conntrack` arguments deleting these flows (pure); a ConntrackError for a value the tool must not be given. */
export function conntrackDeleteArgs(f: ConntrackFlows): string[] {
  if (!isIPv4(f.replySource)) throw new ConntrackError(`reply source "${f.replySource}" is not an IPv4 address`);
  if (f.origDst !== undefined && !isIPv4(f.origDst))
    throw new ConntrackError(`original destination "${f.origDst}" is not an IPv4 address`);
  const port = f.origDstPort;
  if (port !== undefined && (!Number.isInteger(port) || port < 1 || port > 65535))
    throw new ConntrackError(`original destination port ${String(port)} is not in 1..65535`);
  if (port !== undefined && !f.protocol) throw new ConntrackError("a destination port needs a protocol");
  return [
    "-D",
    ...(f.protocol ? ["-p", f.protocol] : []),
    ...(f.origDst !== undefined ? ["--orig-dst", f.origDst] : []),
    ...(port !== undefined ? ["--orig-port-dst", String(port)] : []),
    "--reply-src",
    f.replySource,
  ];
}

/**
 * How many entries `conntrack -D` deleted, from its exit code and stderr (pure): it prints `N flow entries have been
 * deleted` and exits 1 when nothing matched, which is 0 deleted, not a failure. undefined: it failed.
 */
export function deletedCount(code: number | null, stderr: string): number | undefined {
  const deleted = /(\d+) flow entries have been deleted/.exec(stderr);
  return deleted && (code === 0 || code === 1) ? Number(deleted[1]) : undefined;
}

/** Deletes the conntrack entries of these flows; resolves with how many, rejects with a ConntrackError. */
export type ConntrackDeleter = (flows: ConntrackFlows) => Promise<number>;

/**
 * A deleter in this process's network namespace, or (`nsPath`, such as `/proc/<pid>/ns/net`) in the namespace
 * util-linux's nsenter enters for each call (it needs CAP_SYS_ADMIN).
 */
export function conntrackDeleter(nsPath?: string): ConntrackDeleter {
  return (flows) => {
    const args = conntrackDeleteArgs(flows);
    const [program, argv] = nsPath ? ["nsenter", [`--net=${nsPath}`, "--", "conntrack", ...args]] : ["conntrack", args];
    return new Promise((resolve, reject) => {
      const child = spawn(program, argv, { stdio: ["ignore", "ignore", "pipe"] });
      let stderr = "";
      child.stderr.on("data", (d: Buffer) => {
        stderr += d.toString("utf8");
      });
      child.on("error", (e) => reject(new ConntrackError(`cannot run ${program}: ${e.message}`, { cause: e })));
      child.on("close", (code) => {
        const deleted = deletedCount(code, stderr);
        if (deleted !== undefined) resolve(deleted);
        else reject(new ConntrackError(`${program} ${argv.join(" ")} exited ${String(code)}: ${stderr.trim()}`));
      });
    });
  };
}
