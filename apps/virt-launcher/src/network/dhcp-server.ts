/**
 * The launcher's DHCP server for one guest (KubeVirt's in-pod DHCP for the masquerade binding): UDP 67 inside the
 * pod's network namespace, answering only the guest's MAC, replies broadcast on the guest's subnet (the guest has
 * no address yet to unicast to). Malformed datagrams are counted and dropped; nothing a guest sends throws.
 */
import { createSocket, type Socket } from "node:dgram";
import type { Logger } from "@kvt/observability";
import { buildDhcpReply, type DhcpLease, parseDhcpRequest, replyType } from "./dhcp.ts";

/** A running server; `close()` stops it. */
export interface DhcpServer {
  /** Replies sent and datagrams dropped (malformed, another MAC, a message type it does not answer). */
  readonly counters: { replies: number; dropped: number };
  /** Where it listens (port 67 unless a test asked for another). */
  readonly address: { readonly port: number };
  close(): Promise<void>;
}

/**
 * Serves `lease` to the guest with `mac` on port 67 (`port` for tests), replying to `broadcast`:68 (`clientPort`).
 * Resolves once it listens.
 */
export async function startDhcpServer(options: {
  readonly mac: string;
  readonly lease: DhcpLease;
  readonly broadcast: string;
  readonly log: Logger;
  readonly port?: number;
  readonly clientPort?: number;
}): Promise<DhcpServer> {
  const counters = { replies: 0, dropped: 0 };
  const socket: Socket = createSocket({ type: "udp4", reuseAddr: true });
  socket.on("message", (msg) => {
    const req = parseDhcpRequest(msg);
    const type = req && req.mac === options.mac ? replyType(req, options.lease) : undefined;
    if (!req || type === undefined) {
      counters.dropped++;
      return;
    }
    const reply = buildDhcpReply(req, type, options.lease);
    socket.send(reply, options.clientPort ?? 68, options.broadcast, (err) => {
      if (err) options.log.warn({ err }, "DHCP reply not sent");
      else counters.replies++;
    });
  });
  socket.on("error", (err) => options.log.warn({ err }, "DHCP server socket error"));
  await new Promise<void>((resolve, reject) => {
    socket.once("error", reject);
    socket.bind(options.port ?? 67, "0.0.0.0", () => {
      socket.off("error", reject);
      socket.setBroadcast(true);
      resolve();
    });
  });
  return {
    counters,
    address: { port: socket.address().port },
    close: () => new Promise<void>((resolve) => socket.close(() => resolve())),
  };
}
