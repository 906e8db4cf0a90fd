import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { Supervisor, type SupervisorEvent } from "./supervisor.ts";

let dir = "";
let supervisor: Supervisor | undefined;
afterEach(async () => {
  await supervisor?.stopAll();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function until(pred: () => boolean, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  return new Promise((resolve, reject) => {
    const tick = (): void => {
      if (pred()) resolve();
      else if (Date.now() > deadline) reject(new Error("condition not met in time"));
      else setTimeout(tick, 20);
    };
    tick();
  });
}

describe("Supervisor", () => {
  it("restarts a component that dies and logs its output", async () => {
    dir = mkdtempSync(join(tmpdir(), "kvt-sup-"));
    const events: SupervisorEvent[] = [];
    supervisor = new Supervisor((e) => events.push(e));
    const logFile = join(dir, "crasher.log");
    supervisor.start({
      name: "crasher",
      argv: [process.execPath, "-e", "console.log('up'); process.exit(3)"],
      logFile,
    });
    await until(() => events.filter((e) => e.type === "started").length >= 2);
    expect(events.find((e) => e.type === "exited")).toMatchObject({ name: "crasher", code: 3, restartInMs: 1000 });
    expect(supervisor.restartsOf("crasher")).toBeGreaterThanOrEqual(1);
    await until(() => readFileSync(logFile, "utf8").split("up").length > 2);
  });

  it("stopAll() terminates running components and does not restart them", async () => {
    dir = mkdtempSync(join(tmpdir(), "kvt-sup-"));
    const events: SupervisorEvent[] = [];
    supervisor = new Supervisor((e) => events.push(e));
    supervisor.start({
      name: "sleeper",
      argv: [process.execPath, "-e", "setInterval(() => {}, 1000)"],
      logFile: join(dir, "s.log"),
    });
    await until(() => supervisor!.pidOf("sleeper") !== undefined && events.length > 0);
    await supervisor.stopAll();
    expect(events.at(-1)).toMatchObject({ type: "exited", name: "sleeper", signal: "SIGTERM" });
    expect(supervisor.pidOf("sleeper")).toBeUndefined();
  });
});
