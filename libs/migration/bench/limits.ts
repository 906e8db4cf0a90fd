/**
 * The machine's limits, measured in the bench run itself: one-core memcpy bandwidth and loopback TCP throughput
 * between two processes (large writes), so migration figures can be read as a fraction of what the box can do.
 */
import { spawn } from "node:child_process";
import { createServer } from "node:net";

/** Best of several 256 MiB Buffer copies (a single memcpy on one core), bytes/s. */
export function memcpyBytesPerSec(): number {
  const size = 256 * 2 ** 20;
  const a = Buffer.alloc(size, 1);
  const b = Buffer.alloc(size);
  let best = 0;
  for (let i = 0; i < 6; i++) {
    const t0 = performance.now();
    a.copy(b);
    const s = (performance.now() - t0) / 1000;
    if (i > 0) best = Math.max(best, size / s);
  }
  return best;
}

/** A child process writes `bytes` in 4 MiB writes to a local socket this process drains; bytes/s. */
export async function loopbackTcpBytesPerSec(bytes = 2 * 2 ** 30): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  const script = `
    const s = require("node:net").connect(${port}, "127.0.0.1", () => {
      const buf = Buffer.alloc(4 << 20, 7); let left = ${bytes};
      const pump = () => { while (left > 0) { left -= buf.length; if (!s.write(buf)) return s.once("drain", pump); } s.end(); };
      pump();
    });`;
  const child = spawn(process.execPath, ["-e", script], { stdio: "ignore" });
  const seconds = await new Promise<number>((resolve) => {
    server.once("connection", (sock) => {
      let got = 0;
      const t0 = performance.now();
      sock.on("data", (d: Buffer) => {
        got += d.length;
      });
      sock.on("end", () => resolve(got >= bytes ? (performance.now() - t0) / 1000 : Number.NaN));
    });
  });
  await new Promise<void>((r) => child.once("exit", () => r()));
  server.close();
  return bytes / seconds;
}
