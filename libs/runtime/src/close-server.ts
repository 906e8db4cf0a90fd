/**
 * Closing a server for good. `server.close()` resolves only once every socket it accepted has closed, and
 * `closeAllConnections()` reaches only the sockets the HTTP layer still owns: not upgraded ones, not TLS sockets still
 * in their handshake. Under load the embedded API server's stop once waited forever on two watch connections it had
 * left open. {@link trackSockets} keeps every accepted TCP socket so that a stop can end whatever is left.
 */
import type { Server, Socket } from "node:net";

/** The TCP sockets a server accepted and that are still open. */
export interface TrackedSockets {
  /** How many are open now. */
  readonly size: number;
  /** Destroys every one still open; returns how many there were. */
  destroyAll(): number;
}

/** Tracks the sockets `server` accepts from now on (call before it listens). */
export function trackSockets(server: Server): TrackedSockets {
  const open = new Set<Socket>();
  server.on("connection", (socket: Socket) => {
    open.add(socket);
    socket.once("close", () => open.delete(socket));
  });
  return {
    get size() {
      return open.size;
    },
    destroyAll: () => {
      const n = open.size;
      for (const s of open) s.destroy();
      open.clear();
      return n;
    },
  };
}

/**
 * Stops `server` listening and closes every connection: the HTTP layer's own at once (`closeAllConnections` where
 * the server has it), then any socket still open after `graceMs` (default 1 s). Resolves once the server has closed.
 */
export async function closeServer(server: Server, sockets: TrackedSockets, graceMs = 1000): Promise<number> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  (server as Server & { closeAllConnections?: () => void }).closeAllConnections?.();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = await Promise.race([
    closed.then(() => false),
    new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(true), graceMs);
    }),
  ]);
  clearTimeout(timer);
  const destroyed = late ? sockets.destroyAll() : 0;
  await closed;
  return destroyed;
}
