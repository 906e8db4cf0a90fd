/**
 * A throwaway OCI registry for tests: Debian's docker-registry (the CNCF distribution registry) on 127.0.0.1, a
 * free port, plain HTTP, storage in a folder of the caller's; `stop()` ends it.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { freePort } from "@kvt/runtime";

/** A running registry. */
export interface LocalRegistry {
  /** `127.0.0.1:PORT`. */
  readonly address: string;
  /** Stops the registry and waits for it to exit. */
  stop(): Promise<void>;
}

function exited(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.once("exit", () => resolve());
  });
}

/** Starts docker-registry with its storage and config under `dir`; resolves once `/v2/` answers. */
export async function startLocalRegistry(dir: string, timeoutMs = 20_000): Promise<LocalRegistry> {
  const port = await freePort();
  const address = `127.0.0.1:${port}`;
  mkdirSync(join(dir, "storage"), { recursive: true });
  const config = join(dir, "config.yml");
  writeFileSync(
    config,
    [
      "version: 0.1",
      "log:",
      "  level: warn",
      "storage:",
      "  filesystem:",
      `    rootdirectory: ${join(dir, "storage")}`,
      "http:",
      `  addr: ${address}`,
      "",
    ].join("\n"),
  );
  const child = spawn("docker-registry", ["serve", config], { stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4000);
  });
  const stop = async (): Promise<void> => {
    child.kill("SIGTERM");
    await exited(child);
  };
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) break;
    const ok = await fetch(`http://${address}/v2/`).then(
      (r) => r.ok,
      () => false, // not listening yet
    );
    if (ok) return { address, stop };
    await sleep(100);
  }
  await stop();
  throw new Error(`docker-registry did not answer on ${address}:\n${stderr}`);
}
