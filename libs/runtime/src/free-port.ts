/**
 * A TCP port on 127.0.0.1 for a server that starts a little later (a component of the local cluster, a registry, a
 * bench's peer). The port is picked outside the kernel's ephemeral range (`net.ipv4.ip_local_port_range`, usually
 * 32768-60999): the kernel hands ports of that range to every bind to port 0 and every outgoing connection, so a port
 * picked there and released could be taken by any of them before its server binds it (the Deno cluster's virt-api
 * once found its port held by a kubelet's port-0 listener, and restarted every 30 s for 3 minutes). Below the range
 * only another explicit pick can collide: each is probed (bound and released) and never handed out twice by one
 * process.
 */
import { readFileSync } from "node:fs";
import { createServer } from "node:net";

/** The lowest port picked (below it: well-known and registered services a machine may run). */
const LOWEST = 10_000;
/** Ports this process handed out (a probe releases the port, so a second pick could find it free again). */
const handedOut = new Set<number>();

/** The kernel's ephemeral port range, [low, high] (Linux's default where /proc does not say). */
export function ephemeralPortRange(text?: string): [number, number] {
  let raw = text;
  try {
    raw ??= readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8");
  } catch {
    raw = "";
  }
  const [low, high] = raw.trim().split(/\s+/).map(Number);
  return low && high && low <= high ? [low, high] : [32768, 60999];
}

/** The ports outside `range` to pick from: below it when 1000 or more fit there, else above it. */
export function pickRange([low, high]: [number, number]): [number, number] {
  if (low - 1 - LOWEST >= 1000) return [LOWEST, low - 1];
  if (65535 - (high + 1) >= 1000) return [high + 1, 65535];
  return [LOWEST, 65535]; // an unusual range covering nearly everything: any port, probed
}

/** Whether `port` can be bound on 127.0.0.1 right now (bound and released at once). */
function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(false));
    server.listen({ port, host: "127.0.0.1", exclusive: true }, () => server.close(() => resolve(true)));
  });
}

/** One free port outside the ephemeral range, distinct from every other this process got. */
export async function freePort(): Promise<number> {
  const [from, to] = pickRange(ephemeralPortRange());
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = from + Math.floor(Math.random() * (to - from + 1));
    if (handedOut.has(port) || !(await bindable(port))) continue;
    handedOut.add(port);
    return port;
  }
  throw new Error(`no free TCP port on 127.0.0.1 in ${from}-${to} after 200 tries: is the machine out of ports?`);
}
