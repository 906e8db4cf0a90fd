/** Running Debian's `nft` (nftables) with a script. */
import { spawn } from "node:child_process";

/** Runs an `nft -f -` script; rejects with nft's message. */
export type NftRunner = (script: string) => Promise<void>;

/** Runs `nft -f -` with the script on stdin (one transaction: all of it applies, or none). */
export const runNft: NftRunner = (script) =>
  new Promise((resolve, reject) => {
    const child = spawn("nft", ["-f", "-"], { stdio: ["pipe", "ignore", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (d: Buffer) => {
      stderr += d.toString("utf8");
    });
    child.on("error", reject);
    child.on("close", (code) =>
      code === 0 ? resolve() : reject(new Error(`nft -f - exited ${String(code)}: ${stderr.trim()}`)),
    );
    child.stdin.on("error", () => undefined); // nft exited early: its exit code and stderr say why
    child.stdin.end(script);
  });
