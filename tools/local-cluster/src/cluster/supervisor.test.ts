import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
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

  const deathSignal = new Supervisor().parentDeathSignal;
  it.skipIf(!deathSignal)(
    `components die with the supervisor even when it is killed with SIGKILL${deathSignal ? "" : " (skipped: no setpriv --pdeathsig here)"}`,
    async () => {
      dir = mkdtempSync(join(tmpdir(), "kvt-sup-"));
      const pidFile = join(dir, "component.pid");
      const supervisorModule = new URL("./supervisor.ts", import.meta.url).pathname;
      const component = `require("fs").writeFileSync(${JSON.stringify(pidFile)}, String(process.pid)); setInterval(() => {}, 1000)`;
      const script = `
      import { Supervisor } from ${JSON.stringify(supervisorModule)};
      const s = new Supervisor();
      s.start({ name: "sleeper", logFile: ${JSON.stringify(join(dir, "c.log"))},
        argv: [process.execPath, "-e", ${JSON.stringify(component)}] });
      setInterval(() => {}, 1000);`;
      const outer = spawn(process.execPath, ["--input-type=module", "-e", script], { stdio: "ignore" });
      await until(() => existsSync(pidFile) && readFileSync(pidFile, "utf8") !== "");
      const componentPid = Number(readFileSync(pidFile, "utf8"));
      const alive = (pid: number): boolean => {
        try {
          process.kill(pid, 0);
          return true;
        } catch {
          return false;
        }
      };
      expect(alive(componentPid)).toBe(true);
      outer.kill("SIGKILL");
      await until(() => !alive(componentPid), 5000);
    },
  );
});
