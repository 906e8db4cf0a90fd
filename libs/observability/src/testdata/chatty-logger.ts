/**
 * Test fixture (log-destination.test.ts): a process that logs 20,000 lines at trace through createLogger's default
 * destination, writes to stdout and stderr directly, keeps logging, then writes "alive" to argv[2] and ends with 0.
 * Run with stdout/stderr that cannot be written, it shows a logger failure never takes a process down.
 */
import { writeFileSync } from "node:fs";
import { createLogger } from "../index.ts";

const marker = process.argv[2] ?? "";
const log = createLogger({ component: "full-disk", level: "trace" });
for (let i = 0; i < 20_000; i++) log.info({ i, pad: "x".repeat(200) }, "a chatty line");
process.stdout.write("plain stdout line\n");
console.error("plain stderr line");
setTimeout(() => {
  for (let i = 0; i < 1000; i++) log.debug({ i }, "still logging");
  writeFileSync(marker, "alive");
}, 200);
