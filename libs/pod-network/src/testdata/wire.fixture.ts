/** Runs wireMasquerade() for the plan in argv[2] (JSON) in this process's network namespace, then prints "wired". */
import { createLogger } from "@kvt/observability";
import { wireMasquerade } from "../masquerade.ts";
import type { MasqueradePlan } from "../masquerade-plan.ts";

const wired = await wireMasquerade(
  JSON.parse(process.argv[2] ?? "{}") as MasqueradePlan,
  createLogger({ component: "t", level: "silent" }),
);
process.stdout.write(`wired ${wired.tap} ${wired.mac}\n`);
await wired.close();
