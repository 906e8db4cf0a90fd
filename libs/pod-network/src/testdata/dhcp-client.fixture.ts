/**
 * A guest's DHCP exchange, in the network namespace it runs in: DISCOVER and REQUEST for the MAC in argv[2],
 * broadcast from argv[3] (a temporary address, so the kernel has an interface to send a limited broadcast out of),
 * and prints the ACK's yiaddr and options as one JSON line.
 */
import { createSocket } from "node:dgram";

const mac = (process.argv[2] ?? "").split(":").map((h) => Number.parseInt(h, 16));
const from = process.argv[3] ?? "0.0.0.0";
const xid = 0x4b565431;

function message(type: number, extra: number[] = []): Buffer {
  const b = Buffer.alloc(300);
  b.set([1, 1, 6, 0]);
  b.writeUInt32BE(xid, 4);
  b.writeUInt16BE(0x8000, 10); // broadcast the reply: the client has no address yet
  b.set(mac, 28);
  b.writeUInt32BE(0x63825363, 236);
  b.set([53, 1, type, ...extra, 255], 240);
  return b;
}

function options(reply: Buffer): Record<number, number[]> {
  const out: Record<number, number[]> = {};
  for (let i = 240; i < reply.length && reply[i] !== 255; i += 2 + reply[i + 1]) {
    out[reply[i]] = [...reply.subarray(i + 2, i + 2 + reply[i + 1])];
  }
  return out;
}

const listen = createSocket({ type: "udp4", reuseAddr: true });
const send = createSocket({ type: "udp4", reuseAddr: true });
await new Promise<void>((r) => listen.bind(68, "0.0.0.0", () => r()));
await new Promise<void>((r) => send.bind(0, from, () => r()));
send.setBroadcast(true);
const next = (): Promise<Buffer> =>
  new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("no DHCP reply in 5 s")), 5000);
    listen.once("message", (m) => {
      clearTimeout(timer);
      resolve(m);
    });
  });
let reply = next();
send.send(message(1), 67, "255.255.255.255");
const offer = await reply;
reply = next();
const offered = [...offer.subarray(16, 20)];
send.send(message(3, [50, 4, ...offered, 54, 4, ...(options(offer)[54] ?? [])]), 67, "255.255.255.255");
const ack = await reply;
process.stdout.write(`${JSON.stringify({ yiaddr: [...ack.subarray(16, 20)].join("."), options: options(ack) })}\n`);
listen.close();
send.close();
