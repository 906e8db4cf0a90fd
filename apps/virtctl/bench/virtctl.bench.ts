/**
 * `npm run bench -- virtctl`: how long a user waits for virtctl: process start to exit for `version -c` (no
 * network) and for `stop VM` against a local HTTP server answering 202 (kubeconfig read, one request). Prints a
 * table, then one JSON line.
 */
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const main = new URL("../src/main.ts", import.meta.url).pathname;
const N = Number(process.env.BENCH_N ?? 10);
const dir = mkdtempSync(join(tmpdir(), "virtctl-bench-"));
// The API server stand-in runs in its own process: spawnSync blocks this one while virtctl runs.
const STUB = `const s=require("node:http").createServer((q,r)=>{q.resume();q.on("end",()=>{r.writeHead(202);r.end()})});
s.listen(0,"127.0.0.1",()=>process.stdout.write(s.address().port+"\\n"));process.on("SIGTERM",()=>process.exit(0));`;

function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  return Math.round((s[Math.floor(s.length / 2)] ?? 0) * 10) / 10;
}

function time(args: string[], env: Record<string, string>): number {
  const t = performance.now();
  const r = spawnSync(process.execPath, [main, ...args], { env: { PATH: process.env.PATH ?? "", HOME: dir, ...env } });
  if (r.status !== 0) throw new Error(`virtctl ${args.join(" ")} exited ${r.status ?? "?"}: ${r.stderr.toString()}`);
  return performance.now() - t;
}

const stub = spawn(process.execPath, ["-e", STUB], { stdio: ["ignore", "pipe", "ignore"] });
try {
  const port = await new Promise<number>((resolve, reject) => {
    stub.stdout.once("data", (d: Buffer) => resolve(Number(d.toString().trim())));
    stub.once("exit", () => reject(new Error("the stub server exited")));
  });
  const kubeconfig = join(dir, "config");
  writeFileSync(
    kubeconfig,
    `apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:${port}\nusers:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\n`,
  );
  const version: number[] = [];
  const stop: number[] = [];
  for (let i = 0; i < N; i++) version.push(time(["version", "-c"], {}));
  for (let i = 0; i < N; i++) stop.push(time(["stop", "vm1"], { KUBECONFIG: kubeconfig }));
  const rows: [string, string][] = [
    ["virtctl version -c, median wall (ms)", String(median(version))],
    ["virtctl stop VM (one PUT), median wall (ms)", String(median(stop))],
  ];
  const w = Math.max(...rows.map((r) => r[0].length));
  process.stdout.write(`virtctl: ${N} runs each\n`);
  for (const [k, v] of rows) process.stdout.write(`${k.padEnd(w)}  ${v}\n`);
  process.stdout.write(
    `${JSON.stringify({ area: "virtctl", runs: N, versionMs: median(version), stopMs: median(stop) })}\n`,
  );
} finally {
  stub.kill("SIGTERM");
  rmSync(dir, { recursive: true, force: true });
}
