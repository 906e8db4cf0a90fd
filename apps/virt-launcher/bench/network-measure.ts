/**
 * The measuring tools of `npm run bench -- network`, and the record of what the bench made so that all of it goes at
 * the end, on a failure or on a signal:
 *
 *   measure(server[, netns])  ping-pong (network-pingpong.ts), iperf3 -c (host -> server), iperf3 -c -R (server ->
 *                             host), each from `netns` (nsenter) or from this namespace
 *   startLimit()              two namespaces joined by a veth pair, iperf3 -s and busybox `nc -ll -e cat` in the
 *                             second (measure() runs from the first); stop() removes both
 *   startProber(host, port)   one TCP connection, a numbered line every PROBE_MS, each echo's arrival time
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { connect, type Socket } from "node:net";
import { type Iperf3Result, parseIperf3, type RttStats, type SideRun } from "./network-figures.ts";

const PINGPONG = new URL("./network-pingpong.ts", import.meta.url).pathname;

/** The echo server's port: in the guest (its user data), in the limit's second namespace. */
export const ECHO_PORT = 7000;
/** The migration prober's pace (as e2e/network/service-migration.e2e.test.ts). */
export const PROBE_MS = 20;

/** How long measure() runs each part. */
export interface MeasureOptions {
  /** iperf3's run length per direction (s). */
  readonly seconds: number;
  /** The ping-pong's length after its warm-up (s). */
  readonly rttSeconds: number;
  /** Progress lines. */
  readonly say: (line: string) => void;
}

/** What the bench made: children, named namespaces, sockets; removeAll() ends and deletes them. */
export class Leftovers {
  readonly children = new Set<ChildProcess>();
  readonly sockets = new Set<Socket>();
  namespaces: string[] = [];

  /** Kills every child, closes every socket, kills what runs in each namespace and deletes it. Idempotent. */
  removeAll(): void {
    for (const s of this.sockets) s.destroy();
    for (const c of this.children) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
    for (const ns of this.namespaces.splice(0)) {
      try {
        const pids = execFileSync("ip", ["netns", "pids", ns], { encoding: "utf8" }).split(/\s+/).filter(Boolean);
        for (const pid of pids) process.kill(Number(pid), "SIGKILL");
        execFileSync("ip", ["netns", "delete", ns], { stdio: "ignore" });
      } catch {
        // Gone already (deleted by its owner, or never made): nothing to remove.
      }
    }
  }
}

/** `argv` run inside the named network namespace (nsenter, as a kubelet enters a sandbox), or here. */
function inNetns(netns: string | undefined, argv: readonly string[]): [string, string[]] {
  return netns ? ["nsenter", [`--net=/run/netns/${netns}`, "--", ...argv]] : [argv[0] ?? "", argv.slice(1)];
}

/** Runs a child to its end; resolves with its stdout, rejects with its stderr on a failure or the timeout. */
function runChild(left: Leftovers, argv: [string, string[]], timeoutMs: number): Promise<string> {
  const [cmd, args] = argv;
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ["ignore", "pipe", "pipe"] });
    left.children.add(child);
    let out = "";
    let err = "";
    child.stdout.on("data", (d: Buffer) => {
      out += d.toString();
    });
    child.stderr.on("data", (d: Buffer) => {
      err = (err + d.toString()).slice(-2000);
    });
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.on("error", reject);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      left.children.delete(child);
      // iperf3 -J exits 1 with its error inside the JSON: the parser reports it.
      if (code === 0 || (code === 1 && out.trimStart().startsWith("{"))) resolve(out);
      else reject(new Error(`${cmd} ${args.join(" ")} ended (${code ?? signal}): ${err.trim() || out.trim()}`));
    });
  });
}

/** iperf3's client against `server`: host -> server, or server -> host with `reverse`. Retried once (a slow start). */
async function iperf3(
  left: Leftovers,
  o: MeasureOptions,
  server: string,
  reverse: boolean,
  netns?: string,
): Promise<Iperf3Result> {
  const argv = ["iperf3", "-c", server, "-t", String(o.seconds), "-J", ...(reverse ? ["-R"] : [])];
  for (let attempt = 1; ; attempt++) {
    try {
      return parseIperf3(await runChild(left, inNetns(netns, argv), (o.seconds + 120) * 1000));
    } catch (err) {
      if (attempt >= 2) throw err;
      o.say(`iperf3 ${reverse ? "-R " : ""}to ${server} failed (${(err as Error).message}); once more`);
      await new Promise((r) => setTimeout(r, 2000));
    }
  }
}

/** The ping-pong against `host`:ECHO_PORT (network-pingpong.ts, in `netns` or here). */
async function pingPong(left: Leftovers, o: MeasureOptions, host: string, netns?: string): Promise<RttStats> {
  const argv = [process.execPath, PINGPONG, host, String(ECHO_PORT), String(o.rttSeconds)];
  return JSON.parse(await runChild(left, inNetns(netns, argv), (o.rttSeconds + 120) * 1000)) as RttStats;
}

/** A side's round trip and its throughput both ways, against `server` (from `netns`, or from this namespace). */
export async function measure(
  left: Leftovers,
  o: MeasureOptions,
  name: string,
  server: string,
  netns?: string,
): Promise<SideRun> {
  o.say(`${name}: TCP ping-pong to ${server}:${ECHO_PORT} for ${o.rttSeconds} s`);
  const rtt = await pingPong(left, o, server, netns);
  o.say(`${name}: round trip median ${rtt.medianUs} us over ${rtt.count}; iperf3 to it for ${o.seconds} s`);
  const rx = await iperf3(left, o, server, false, netns);
  o.say(`${name}: into it ${(rx.bitsPerSecond / 1e6).toFixed(1)} Mbit/s; iperf3 -R (from it)`);
  const tx = await iperf3(left, o, server, true, netns);
  o.say(`${name}: from it ${(tx.bitsPerSecond / 1e6).toFixed(1)} Mbit/s`);
  return { tx, rx, rtt };
}

/** The limit's two namespaces, ready to measure: the server's address and the client's namespace. */
export interface VethLimit {
  readonly server: string;
  readonly clientNetns: string;
  /** Ends the servers and deletes both namespaces (once; later calls do nothing). */
  stop(): void;
}

/** The limit: two namespaces joined by a veth pair, the guest's servers (iperf3, the echo) in the second. */
export async function startLimit(left: Leftovers): Promise<VethLimit> {
  const tag = randomBytes(3).toString("hex");
  const [a, b] = [`kvtnb-${tag}-a`, `kvtnb-${tag}-b`];
  for (const ns of [a, b]) {
    execFileSync("ip", ["netns", "add", ns]);
    left.namespaces.push(ns);
    execFileSync("ip", ["-n", ns, "link", "set", "lo", "up"]);
  }
  execFileSync("ip", ["-n", a, "link", "add", "veth-a", "type", "veth", "peer", "name", "veth-b", "netns", b]);
  execFileSync("ip", ["-n", a, "addr", "add", "192.0.2.1/30", "dev", "veth-a"]);
  execFileSync("ip", ["-n", b, "addr", "add", "192.0.2.2/30", "dev", "veth-b"]);
  execFileSync("ip", ["-n", a, "link", "set", "veth-a", "up"]);
  execFileSync("ip", ["-n", b, "link", "set", "veth-b", "up"]);
  const servers = [
    ["iperf3", "-s"],
    ["busybox", "nc", "-ll", "-p", String(ECHO_PORT), "-e", "busybox", "cat"],
  ].map((argv) => {
    const [cmd, args] = inNetns(b, argv);
    const child = spawn(cmd, args, { stdio: "ignore" });
    left.children.add(child);
    return child;
  });
  await new Promise((r) => setTimeout(r, 1000)); // both servers listening (nothing to poll for in another netns)
  let stopped = false;
  return {
    server: "192.0.2.2",
    clientNetns: a,
    stop: () => {
      if (stopped) return;
      stopped = true;
      for (const s of servers) s.kill("SIGKILL");
      left.namespaces = left.namespaces.filter((n) => n !== a && n !== b);
      for (const ns of [a, b]) execFileSync("ip", ["netns", "delete", ns]);
    },
  };
}

/** A connection with a numbered line every PROBE_MS; each echoed line's arrival time (performance.now()). */
export interface Prober {
  readonly replies: number[];
  failure(): string | undefined;
  stop(): void;
}

/** Opens the prober's connection to `host`:`port` and starts its lines. */
export async function startProber(left: Leftovers, host: string, port: number): Promise<Prober> {
  const socket = await new Promise<Socket>((resolve, reject) => {
    const s = connect({ host, port, timeout: 10_000 });
    s.once("connect", () => resolve(s));
    s.once("timeout", () => reject(new Error(`connect ${host}:${port} timed out`)));
    s.once("error", reject);
  });
  left.sockets.add(socket);
  socket.setTimeout(0);
  socket.setNoDelay(true);
  const replies: number[] = [];
  let failure: string | undefined;
  let pending = "";
  socket.on("data", (d: Buffer) => {
    pending += d.toString("latin1");
    const lines = pending.split("\n");
    pending = lines.pop() ?? "";
    for (const _ of lines) replies.push(performance.now());
  });
  socket.on("error", (e) => {
    failure ??= e.message;
  });
  socket.on("close", () => {
    failure ??= "the connection closed";
  });
  let seq = 0;
  const timer = setInterval(() => socket.write(`${seq++}\n`), PROBE_MS);
  return {
    replies,
    failure: () => failure,
    stop: () => {
      clearInterval(timer);
      socket.removeAllListeners("close");
      socket.destroy();
      left.sockets.delete(socket);
    },
  };
}

/** Resolves once `cond()` holds; rejects naming `what` after `timeoutMs`. */
export async function until(cond: () => boolean, what: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
