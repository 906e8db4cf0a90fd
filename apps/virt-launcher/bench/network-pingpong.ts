/**
 * The request/response latency of `npm run bench -- network`: a TCP ping-pong against a line echo server (busybox
 * `nc -ll -e cat`: in the guest, and in the veth limit's second namespace). One 64-byte line out, wait for all of it
 * back, repeat: each round trip is timed on its own (TCP_NODELAY, one message in flight, so neither Nagle nor delayed
 * ACKs hold a segment). A warm-up of WARMUP round trips is not counted. Runs in whichever network namespace it is
 * started in (the bench starts it with nsenter for the limit).
 *
 *   stdout: one JSON object, rttStats() of the counted round trips: {"count":..,"medianUs":..,"meanUs":..,"p99Us":..}
 *
 * Usage: node network-pingpong.ts HOST PORT SECONDS
 */
import { connect } from "node:net";
import { rttStats } from "./network-figures.ts";

const WARMUP = 20;
const MESSAGE = Buffer.from(`${"x".repeat(63)}\n`);
/** At most this many round trips however long SECONDS is. */
const MAX_ROUND_TRIPS = 20_000;

const [host = "", portText = "", secondsText = "3"] = process.argv.slice(2);
const seconds = Number(secondsText);
const socket = connect({ host, port: Number(portText) });
socket.setNoDelay(true);
socket.setTimeout(10_000, () => socket.destroy(new Error(`no answer from ${host}:${portText} in 10 s`)));
socket.on("error", (err) => {
  process.stderr.write(`ping-pong: ${err.message}\n`);
  process.exit(1);
});

const samples: number[] = [];
let sentAt = 0;
let got = 0;
let done = 0;
let endAt = 0;
function send(): void {
  got = 0;
  sentAt = performance.now();
  socket.write(MESSAGE);
}
socket.on("connect", send);
socket.on("data", (d: Buffer) => {
  got += d.length;
  if (got < MESSAGE.length) return;
  const us = (performance.now() - sentAt) * 1000;
  done++;
  if (done === WARMUP) endAt = performance.now() + seconds * 1000;
  else if (done > WARMUP) samples.push(us);
  if (done > WARMUP && (performance.now() >= endAt || samples.length >= MAX_ROUND_TRIPS)) {
    process.stdout.write(`${JSON.stringify(rttStats(samples))}\n`);
    socket.destroy();
    return;
  }
  send();
});
