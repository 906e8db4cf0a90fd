/**
 * Relays a caller's WebSocket to an upstream one (a port-forward tunnel to virt-handler) with backpressure: each
 * side's messages become binary messages on the other, a slow reader pauses the fast writer, and the first side to
 * close or fail closes both. The caller is pinged, as KubeVirt's streamer does, so a caller that vanished without a
 * close frame is noticed and the guest connection released.
 */
import { pipeline } from "node:stream";
import { createWebSocketStream, type WebSocket } from "ws";

/** How often the caller is pinged, and how long it may stay silent. */
export interface KeepAlive {
  readonly intervalMs: number;
  readonly timeoutMs: number;
}

/** KubeVirt pings every second and gives up after a minute of silence; one ping per 10 s is enough to notice. */
export const DEFAULT_KEEP_ALIVE: KeepAlive = { intervalMs: 10_000, timeoutMs: 60_000 };

/** Relays `client` and `upstream` until either closes; `onClosed` runs once, when both are gone. */
export function relayWebSockets(
  client: WebSocket,
  upstream: WebSocket,
  onClosed: () => void,
  keepAlive: KeepAlive = DEFAULT_KEEP_ALIVE,
): void {
  const a = createWebSocketStream(client);
  const b = createWebSocketStream(upstream);
  let lastPong = Date.now();
  client.on("pong", () => {
    lastPong = Date.now();
  });
  const ping = setInterval(() => {
    if (Date.now() - lastPong > keepAlive.timeoutMs) client.terminate();
    else client.ping();
  }, keepAlive.intervalMs);
  ping.unref();
  let open = 2;
  const done = (): void => {
    clearInterval(ping);
    a.destroy();
    b.destroy();
    if (--open === 0) onClosed();
  };
  pipeline(a, b, done);
  pipeline(b, a, done);
}
