import { spawnSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { hasKvm } from "./kvm.ts";
import { testGuestPath } from "./native.ts";
import { Vm } from "./vm.ts";

const kvm = hasKvm();
if (!kvm) console.warn("\n*** /dev/kvm is missing: the VM lifecycle tests of @kvt/vmm are SKIPPED ***\n");
const isDeno = "Deno" in globalThis;

const openFds = (): number => readdirSync("/proc/self/fd").length;
const rssBytes = (): number => Number(/VmRSS:\s+(\d+)/.exec(readFileSync("/proc/self/status", "utf8"))?.[1]) * 1024;

describe.skipIf(!kvm)("Vm lifecycle", () => {
  it("leaks no fds and no memory over 1,000 create/destroy cycles (half of them started)", () => {
    const image = readFileSync(testGuestPath());
    const cycle = (i: number): void => {
      const vm = Vm.create({ memoryBytes: 32 << 20, kernel: { image, cmdline: "pattern=idle tick=1" } });
      if (i % 2) vm.start();
      vm.stop();
    };
    for (let i = 0; i < 50; i++) cycle(i); // warm up allocator and JIT
    const fds = openFds();
    const rss = rssBytes();
    for (let i = 0; i < 1000; i++) cycle(i);
    expect(openFds()).toBe(fds);
    expect(rssBytes() - rss).toBeLessThan(16 << 20);
  }, 120_000);

  it.skipIf(isDeno)("lets the process exit while vCPUs run (the cleanup hook stops them)", () => {
    const script = `
      const { Vm, testGuestPath } = await import(${JSON.stringify(new URL("./index.ts", import.meta.url).pathname)});
      const vm = Vm.create({ memoryBytes: 32 << 20, kernel: { path: testGuestPath(), cmdline: "pattern=seq ws=8" } });
      vm.on("serial-output", () => { console.log("running"); process.exit(0); });
      vm.start();`;
    const r = spawnSync(process.execPath, ["--input-type=module", "-e", script], { encoding: "utf8", timeout: 30_000 });
    expect(r.stderr).toBe("");
    expect(r.stdout.trim()).toBe("running");
    expect(r.status).toBe(0);
  });

  it.skipIf(isDeno)("runs a VM inside a worker thread and cleans up when the worker ends", () => {
    const script = `
      import { Worker } from "node:worker_threads";
      const code = \`
        const { Vm, testGuestPath } = await import(${JSON.stringify(new URL("./index.ts", import.meta.url).pathname)});
        const { parentPort } = await import("node:worker_threads");
        const vm = Vm.create({ memoryBytes: 32 << 20, kernel: { path: testGuestPath(), cmdline: "pattern=idle tick=5" } });
        vm.on("serial-output", (c) => parentPort.postMessage(new TextDecoder().decode(c)));
        vm.start();\`;
      const w = new Worker(code, { eval: true, type: "module" });
      w.once("message", async (m) => { console.log(m.length > 0 ? "output" : "empty"); await w.terminate(); console.log("terminated"); });`;
    const r = spawnSync(process.execPath, ["--input-type=module", "-e", script], { encoding: "utf8", timeout: 30_000 });
    expect(r.stderr).toBe("");
    expect(r.stdout.trim().split("\n")).toEqual(["output", "terminated"]);
    expect(r.status).toBe(0);
  });
});
