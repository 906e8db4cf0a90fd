/**
 * A stand-in container program for the log rotation test: prints 2 MiB to stdout (its container log), and writes
 * 4,000 numbered console lines to `<pod dir>/virt-serial0-log` (its working directory), renaming that file to `.0` every 1,000 lines as
 * virt-launcher's console log rotates (the guest-console-log container follows it); then prints "done" and idles
 * until SIGTERM.
 */
import { appendFileSync, renameSync } from "node:fs";
import { join } from "node:path";

const consoleLog = join(process.cwd(), "virt-serial0-log");
const chunk = `${"x".repeat(1023)}\n`.repeat(64); // 64 KiB
let sent = 0;
let line = 0;
const timer = setInterval(() => {
  if (sent < 32) {
    process.stdout.write(chunk);
    sent++;
  }
  for (let i = 0; i < 100 && line < 4000; i++) {
    appendFileSync(consoleLog, `console ${String(line).padStart(4, "0")}\n`);
    line++;
    if (line % 1000 === 0) renameSync(consoleLog, `${consoleLog}.0`);
  }
  if (sent >= 32 && line >= 4000) {
    clearInterval(timer);
    process.stdout.write("done\n");
  }
}, 20);
process.on("SIGTERM", () => process.exit(0));
setInterval(() => undefined, 60_000);
