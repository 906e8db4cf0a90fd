/** `node src/cli-debug.ts [kernel args...]`: one verbose boot of the demo image on our VMM inside L1 (guest-debug.ts). */
import { buildL1Image } from "./l1-image.ts";
import { runInL1 } from "./l1-run.ts";

const image = await buildL1Image((l) => void process.stdout.write(`${l}\n`));
await runInL1(image, {
  job: "tools/nested/src/guest-debug.ts",
  args: process.argv.slice(2),
  onLine: (line, atMs) => {
    if (!line.includes("TCG doesn't support")) process.stdout.write(`[L1 +${(atMs / 1000).toFixed(1)}s] ${line}\n`);
  },
});
