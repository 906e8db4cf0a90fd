import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { processAlive } from "../cluster/process-alive.ts";
import { ContainerProcess } from "./container-process.ts";
import { readRecords } from "./container-records.ts";

let dir = "";
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function until(pred: () => boolean, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!pred()) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe("ContainerProcess", () => {
  it("reports the exit code and kills what the container started when its process ends", async () => {
    dir = mkdtempSync(join(tmpdir(), "kvt-cp-"));
    // The container's process starts a long-lived grandchild (as the launcher starts QEMU), prints its pid and exits 3.
    const script =
      "const c = require('node:child_process').spawn('sleep', ['300'], { stdio: 'ignore' }); console.log('child ' + c.pid); setTimeout(() => process.exit(3), 200);";
    const c = new ContainerProcess(
      {
        kind: "process",
        name: "compute",
        argv: [process.execPath, "-e", script],
        env: { PATH: process.env.PATH ?? "" },
        nice: 10,
      },
      "img",
      dir,
      () => {},
    );
    c.start();
    await until(() => c.state.state === "terminated");
    expect(c.state).toMatchObject({ state: "terminated", exitCode: 3, reason: "Error" });
    const grandchild = Number(/child (\d+)/.exec(readFileSync(c.logPath, "utf8"))?.[1]);
    expect(grandchild).toBeGreaterThan(0);
    await until(() => !processAlive(grandchild));
  });

  it("stop() sends SIGTERM and the container ends", async () => {
    dir = mkdtempSync(join(tmpdir(), "kvt-cp-"));
    const c = new ContainerProcess(
      {
        kind: "process",
        name: "compute",
        argv: [process.execPath, "-e", "setInterval(() => {}, 1000)"],
        env: {},
        nice: 0,
      },
      "img",
      dir,
      () => {},
    );
    c.start();
    await until(() => c.state.state === "running");
    await c.stop(5);
    expect(c.state).toMatchObject({ state: "terminated", exitCode: 143 });
  });

  it("adopt() follows a container another kubelet started and reports the exit code its shim wrote", async () => {
    dir = mkdtempSync(join(tmpdir(), "kvt-cp-"));
    const plan = {
      kind: "process" as const,
      name: "compute",
      argv: [process.execPath, "-e", "setTimeout(() => process.exit(3), 500)"],
      env: { PATH: process.env.PATH ?? "" },
      nice: 0,
    };
    // The first kubelet starts it (and records it); a second one adopts it from the record, as after a restart.
    const first = new ContainerProcess(plan, "img", dir, () => {}, { podUid: "p1", graceSeconds: 5 });
    first.start();
    await until(() => readRecords(dir).has("compute"));
    const record = readRecords(dir).get("compute")!;
    expect(record).toMatchObject({ podUid: "p1", container: "compute", pid: first.pid, graceSeconds: 5 });
    const second = new ContainerProcess(plan, "img", dir, () => {});
    second.adopt(record);
    expect(second.state.state).toBe("running");
    expect(second.pid).toBe(record.pid);
    await until(() => second.state.state === "terminated");
    expect(second.state).toMatchObject({ state: "terminated", exitCode: 3, reason: "Error" });
  });

  it("adopt() of a container that ended while nobody watched reports how it ended", async () => {
    dir = mkdtempSync(join(tmpdir(), "kvt-cp-"));
    const plan = {
      kind: "process" as const,
      name: "compute",
      argv: [process.execPath, "-e", "process.exit(0)"],
      env: { PATH: process.env.PATH ?? "" },
      nice: 0,
    };
    const first = new ContainerProcess(plan, "img", dir, () => {});
    first.start();
    await until(() => first.state.state === "terminated");
    const second = new ContainerProcess(plan, "img", dir, () => {});
    second.adopt(readRecords(dir).get("compute"));
    expect(second.state).toMatchObject({ state: "terminated", exitCode: 0, reason: "Completed" });
  });
});
