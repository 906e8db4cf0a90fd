/**
 * The launcher's DHCP server for one guest (KubeVirt's in-pod DHCP of the masquerade and bridge bindings): UDP 67
 * inside the pod's network namespace, answering only the guest's MAC, replies broadcast (the guest has no address
 * yet to unicast to). Malformed datagrams are counted and dropped; nothing a guest sends throws.
 *
 *   masquerade: one socket on 0.0.0.0:67; replies to the guest subnet's broadcast, routed out of k6t-eth0
 *   bridge:     the pod has no route left (its address went to the guest), so replies leave from a second socket
 *               bound to the bridge's own address (169.254.75.1x) to 255.255.255.255: the kernel sends a limited
 *               broadcast out of the interface owning the source address (KubeVirt picks the interface with
 *               IP_PKTINFO instead, which Node's dgram does not offer)
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
  /** Send the replies from this local address (the bridge binding's 169.254.75.1x); default the listening socket. */
  readonly replyFrom?: string;
}): Promise<DhcpServer> {
  const counters = { replies: 0, dropped: 0 };
  const socket: Socket = createSocket({ type: "udp4", reuseAddr: true });
  let sender = socket;
  const onMessage = (msg: Buffer): void => {
    const req = parseDhcpRequest(msg);
    const type = req && req.mac === options.mac ? replyType(req, options.lease) : undefined;
    if (!req || type === undefined) {
      counters.dropped++;
      return;
    }
    const reply = buildDhcpReply(req, type, options.lease);
    sender.send(reply, options.clientPort ?? 68, options.broadcast, (err) => {
      if (err) options.log.warn({ err }, "DHCP reply not sent");
      else counters.replies++;
    });
  };
  socket.on("message", onMessage);
  socket.on("error", (err) => options.log.warn({ err }, "DHCP server socket error"));
  await bindSocket(socket, options.port ?? 67, "0.0.0.0");
  const port = socket.address().port;
  if (options.replyFrom) {
    sender = createSocket({ type: "udp4", reuseAddr: true });
    // A renewal unicast to the server's address lands on this more specific socket: it is answered too.
    sender.on("message", onMessage);
    sender.on("error", (err) => options.log.warn({ err }, "DHCP server socket error"));
    try {
      await bindSocket(sender, port, options.replyFrom);
    } catch (err) {
      socket.close();
      throw err;
    }
  }
  const sockets = sender === socket ? [socket] : [socket, sender];
  return {
    counters,
    address: { port },
    close: () => Promise.all(sockets.map((s) => new Promise<void>((resolve) => s.close(() => resolve())))).then(),
  };
}

function bindSocket(socket: Socket, port: number, address: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    socket.once("error", reject);
    socket.bind(port, address, () => {
      socket.off("error", reject);
      socket.setBroadcast(true);
      resolve();
    });
  });
}
