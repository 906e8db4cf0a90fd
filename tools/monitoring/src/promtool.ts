/**
 * Prometheus's `promtool`, for the tests that check rules with it (tools/monitoring's and tools/release's): from
 * Debian's `prometheus` package, installed when missing and running as root (CI does), as other host tools are.
 */
import { spawnSync } from "node:child_process";
import { ensureHostTools } from "@kvt/images";

/** The promtool command once it is on PATH; throws saying how to install it otherwise. */
export async function ensurePromtool(): Promise<string> {
  await ensureHostTools([{ bin: "promtool", pkg: "prometheus" }], () => {});
  if (spawnSync("promtool", ["--version"]).status !== 0) {
    throw new Error("promtool is missing: install it with `apt-get install -y prometheus` (Debian)");
  }
  return "promtool";
}
