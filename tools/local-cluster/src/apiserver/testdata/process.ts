/** Test support: runs `main.ts` as a child process and talks to it over HTTPS with the kubeconfig it wrote. */
import { type ChildProcess, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { Agent, request } from "node:https";
import { join } from "node:path";
import { parse } from "yaml";

/** A running server process. */
export interface ServerProcess {
  readonly child: ChildProcess;
  call(method: string, path: string, body?: unknown): Promise<{ code: number; body: unknown }>;
  close(): void;
}

/** Starts `main.ts --data-dir dir` and resolves once it printed that it listens. */
export async function startServerProcess(dir: string): Promise<ServerProcess> {
  const main = new URL("../main.ts", import.meta.url).pathname;
  const child = spawn(process.execPath, [main, "--data-dir", dir, "--log-level", "warn"], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr?.on("data", (d: Buffer) => {
    stderr += d.toString();
  });
  await new Promise<void>((resolve, reject) => {
    child.stdout?.on("data", (d: Buffer) => {
      if (d.toString().includes("listening on")) resolve();
    });
    child.once("exit", (code) => reject(new Error(`server exited with ${code}: ${stderr}`)));
  });
  const kc = parse(readFileSync(join(dir, "kubeconfig"), "utf8")) as {
    clusters: { cluster: { server: string; "certificate-authority-data": string } }[];
    users: { user: { token: string } }[];
  };
  const url = new URL(kc.clusters[0]?.cluster.server ?? "");
  const agent = new Agent({
    keepAlive: true,
    ca: Buffer.from(kc.clusters[0]?.cluster["certificate-authority-data"] ?? "", "base64"),
  });
  const token = kc.users[0]?.user.token ?? "";
  return {
    child,
    call(method, path, body) {
      return new Promise((resolve, reject) => {
        const req = request(
          {
            host: url.hostname,
            port: url.port,
            method,
            path,
            agent,
            headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
          },
          (res) => {
            const chunks: Buffer[] = [];
            res.on("data", (c: Buffer) => chunks.push(c));
            res.on("end", () => {
              const text = Buffer.concat(chunks).toString();
              resolve({ code: res.statusCode ?? 0, body: text ? (JSON.parse(text) as unknown) : undefined });
            });
            res.on("error", reject);
          },
        );
        req.on("error", reject);
        req.end(body === undefined ? undefined : JSON.stringify(body));
      });
    },
    close() {
      agent.destroy();
      if (child.exitCode === null) child.kill("SIGTERM");
    },
  };
}
