/**
 * Runs wireBridge() for the plan in argv[2] (JSON) in this process's network namespace, prints the wired result as
 * one JSON line, and serves DHCP until its stdin ends.
 */
import { createLogger } from "@kvt/observability";
import { wireBridge } from "../bridge.ts";
import type { BridgePlan } from "../bridge-plan.ts";

const wired = await wireBridge(
  JSON.parse(process.argv[2] ?? "{}") as BridgePlan,
  createLogger({ component: "t", level: "silent" }),
);
process.stdout.write(`${JSON.stringify({ tap: wired.tap, mac: wired.mac, ipAddresses: wired.ipAddresses })}\n`);
process.stdin.resume();
process.stdin.on("end", () => void wired.close());
