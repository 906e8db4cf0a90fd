import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { CHECK_START, GROUP_START, MAX_CONSOLE_LINE } from "./check-runner.ts";
import { GuestConsole } from "./guest-console.ts";
import { L1_SUITES, suiteChecks } from "./guest-suite.ts";
import { moduleLoadOrder } from "./l1-image.ts";
import {
  CLOCK_PROBE,
  COUNTER_LOOP,
  counterValues,
  judgeClock,
  judgeCounter,
  parseClockProbe,
} from "./migration-verdict.ts";
import { jobFinished, laneTally, lastNamed, linesBefore, parseBenchSamples, parseChecks } from "./results.ts";
import { DEMO_CONTAINER_DISK, SEED_VM_MANIFEST, seedVmi, userDataOf } from "./seed-vmi.ts";

const ko = (deps: string): Uint8Array => Buffer.from(`\0license=GPL\0depends=${deps}\0name=x\0`);

describe("nested lane (pure parts)", () => {
  it("orders modules so dependencies load first, once each, keeping options", () => {
    const files: Record<string, string> = { kvm_amd: "kvm,ccp", kvm: "irqbypass", ccp: "", irqbypass: "" };
    const index = new Map(Object.keys(files).map((k) => [k, k]));
    const order = moduleLoadOrder([["kvm-amd", "npt=1"]], index, (p) => ko(files[p] ?? ""));
    expect(order).toEqual([
      ["irqbypass", ""],
      ["kvm", ""],
      ["ccp", ""],
      ["kvm_amd", "npt=1"],
    ]);
    expect(() => moduleLoadOrder([["nope", ""]], index, () => ko(""))).toThrow(/not in the kernel package/);
  });

  it("parses check and bench lines out of the L1 console, skipping garbled ones", () => {
    const lines = [
      "[  1.0] noise",
      'KVT_NESTED_CHECK {"name":"boot-to-marker","ok":true,"ms":12}',
      'xx KVT_NESTED_CHECK {"name":"broken"',
      'KVT_NESTED_BENCH {"vmm":"kvt","run":1}',
    ];
    expect(parseChecks(lines)).toEqual([{ name: "boot-to-marker", ok: true, ms: 12 }]);
    expect(parseBenchSamples(lines)).toEqual([{ vmm: "kvt", run: 1 }]);
  });

  it("waits for a console line, including one that arrives in pieces", async () => {
    const c = new GuestConsole();
    const wait = c.waitFor(/^hi$/, 1000);
    c.feed(Buffer.from("echo hi\r\nh"));
    c.feed(Buffer.from("i\r\n"));
    await expect(wait).resolves.toMatchObject({ line: "hi" });
    expect(c.firstByteMs).toBeGreaterThanOrEqual(0);
    await expect(c.waitFor(/never/, 10)).rejects.toThrow(/no \/never\//);
  });

  it("accepts a counter that continues on the target, across a line split by the switch-over", () => {
    const source = "ready\ncount 0\ncount 1\nT=17 U=1.5 E\ndemo:/# count 2\ncou";
    const target = "nt 3\ncount 4\ncount 5\ncount 6\ncount 1";
    expect(counterValues(source)).toEqual([0, 1, 2]);
    const v = judgeCounter(source, target, 3);
    expect(v).toMatchObject({ ok: true, lastOnSource: 2, firstOnTarget: 3, lastOnTarget: 6 });
  });

  it.each([
    ["restarted", "count 0\ncount 1\n", "count 0\ncount 1\ncount 2\n", /restarted at 0/],
    ["skipped", "count 0\ncount 1\n", "count 3\ncount 4\ncount 5\n", /skipped: 1 then 3/],
    ["repeated", "count 0\ncount 1\n", "count 1\ncount 2\ncount 3\n", /went back/],
    ["stalled", "count 0\ncount 1\n", "count 2\n", /printed 1 count lines, wanted 3/],
    ["never started", "", "count 0\ncount 1\ncount 2\n", /source printed no count line/],
  ])("refuses a counter that %s", (_name, source, target, why) => {
    const v = judgeCounter(source, target, 3);
    expect(v.ok).toBe(false);
    expect(v.detail).toMatch(why);
  });

  it("reads the guest clock probe", () => {
    expect(parseClockProbe("T=1763800000 U=123.45 E")).toEqual({ guestWall: 1763800000, guestUptime: 123.45 });
    expect(parseClockProbe("echo T=$(date +%s) U=$(cut -d' ' -f1 /proc/uptime)")).toBeUndefined();
    expect(parseClockProbe("T=1763800000.%N")).toBeUndefined();
    expect(parseClockProbe("T=1763800000 U=12")).toBeUndefined(); // a line still arriving
  });

  it("judges the guest clock jump against the downtime plus slack", () => {
    const before = { guestWall: 1000, guestUptime: 50, hostSeconds: 5000 };
    // The guest ran on with the host (KVM_CLOCK_REALTIME): no jump beyond the answers' latency.
    expect(judgeClock(before, { guestWall: 1030, guestUptime: 80, hostSeconds: 5030.1 }, 200, 1000)).toMatchObject({
      ok: true,
      uptimeJumpMs: -100,
      wallJumpMs: -100,
    });
    // The guest clock stopped for the downtime: behind by about the downtime, still within it.
    expect(judgeClock(before, { guestWall: 1030, guestUptime: 79.7, hostSeconds: 5030 }, 300, 100).ok).toBe(true);
    // A 5 s jump of the monotonic clock with 200 ms downtime is not.
    expect(judgeClock(before, { guestWall: 1035, guestUptime: 85, hostSeconds: 5030 }, 200, 1000)).toMatchObject({
      ok: false,
      uptimeJumpMs: 5000,
    });
    // Nor is a wall clock that was set back (e.g. the guest restarted its clock from the RTC).
    expect(judgeClock(before, { guestWall: 900, guestUptime: 80, hostSeconds: 5030 }, 200, 1000).ok).toBe(false);
  });

  it("keeps the commands typed on the guest console within the UART FIFO", () => {
    for (const line of [COUNTER_LOOP, CLOCK_PROBE])
      expect(Buffer.byteLength(line)).toBeLessThanOrEqual(MAX_CONSOLE_LINE);
  });

  it("turns vitest's JSON report into one check per suite file", () => {
    const json = {
      testResults: [
        {
          name: "/p/libs/vmm/src/vm.test.ts",
          startTime: 1_000,
          endTime: 13_400,
          assertionResults: [
            { fullName: "a", status: "passed" },
            { fullName: "b", status: "skipped" },
          ],
        },
        {
          name: "/p/libs/migration/src/live-migration.test.ts",
          assertionResults: [
            { fullName: "moves", status: "passed" },
            {
              fullName: "ping-pong",
              status: "failed",
              failureMessages: ["AssertionError: expected 1 to be 2\n    at x.test.ts:3:1"],
            },
          ],
        },
        { name: "/p/x.test.ts", assertionResults: [{ fullName: "c", status: "skipped" }] },
      ],
    };
    const checks = suiteChecks(json, "/p", 61_000);
    expect(checks).toEqual([
      {
        name: "suite libs/vmm/src/vm.test.ts",
        ok: true,
        detail: "1 passed, 0 failed, 1 skipped (12 s of vitest 61 s)",
        tests: { passed: 1, failed: 0, skipped: 1, failedNames: [], skippedNames: ["b"] },
      },
      {
        name: "suite libs/migration/src/live-migration.test.ts",
        ok: false,
        detail:
          "1 passed, 1 failed, 0 skipped (vitest 61 s): ping-pong (AssertionError: expected 1 to be 2 at x.test.ts:3:1)",
        tests: { passed: 1, failed: 1, skipped: 0, failedNames: ["ping-pong"], skippedNames: [] },
      },
      {
        name: "suite x.test.ts",
        ok: false,
        detail: "0 passed, 0 failed, 1 skipped (vitest 61 s)",
        tests: { passed: 0, failed: 0, skipped: 1, failedNames: [], skippedNames: ["c"] },
      },
    ]);
    // In npm test's tally: tests one by one, skips named, a file where nothing ran is a failure.
    const tally = laneTally([{ name: "boot-to-marker", ok: true, ms: 1 }, ...checks.map((c) => ({ ...c, ms: 1 }))]);
    expect(tally).toEqual({
      passed: 3,
      failed: 2,
      skipped: 2,
      failedNames: [
        "suite libs/migration/src/live-migration.test.ts: ping-pong",
        "suite x.test.ts: 0 passed, 0 failed, 1 skipped (vitest 61 s)",
      ],
      skippedNames: ["suite libs/vmm/src/vm.test.ts: b", "suite x.test.ts: c"],
    });
  });

  it("counts a job that did not finish, or reported nothing, as a failure with the reason", () => {
    const ok = { name: "boot-to-marker", ok: true, ms: 1 };
    expect(laneTally([ok], "L1 was stopped after 1200 s (timeout)")).toMatchObject({
      passed: 1,
      failed: 1,
      failedNames: ["lane: L1 was stopped after 1200 s (timeout)"],
    });
    expect(laneTally([])).toMatchObject({ passed: 0, failed: 1, failedNames: ["lane: the job reported no check"] });
    expect(jobFinished(["x", "KVT_NESTED_DONE"])).toBe(true);
    expect(jobFinished(["KVT_NESTED_CHECK {}"])).toBe(false);
  });

  it("finds where a stalled job was and keeps the lines of the groups before it for the re-run", () => {
    const lines = [
      `${GROUP_START}boot`,
      `${CHECK_START}boot-to-marker`,
      'KVT_NESTED_CHECK {"name":"boot-to-marker","ok":true,"ms":1}',
      `${GROUP_START}net`,
      `${CHECK_START}net-setup`,
      'KVT_NESTED_CHECK {"name":"net-setup","ok":true,"ms":1}',
      `${CHECK_START}net-migration-link-kept`,
      "l1-monitor: up 900s load 1.00 1.00 1.00",
    ];
    expect(lastNamed(lines, GROUP_START)).toBe("net");
    expect(lastNamed(lines, CHECK_START)).toBe("net-migration-link-kept");
    expect(lastNamed(["x"], CHECK_START)).toBeUndefined();
    const kept = linesBefore(lines, `${GROUP_START}net`);
    expect(parseChecks(kept).map((c) => c.name)).toEqual(["boot-to-marker"]);
    expect(linesBefore(["a", "b"], "c")).toEqual(["a", "b"]);
  });

  it("runs every test file that gates on KVM in L1 (the same files npm test runs on the host)", () => {
    const root = new URL("../../../", import.meta.url).pathname;
    const files = execFileSync("git", ["ls-files", "*.test.ts"], { cwd: root, encoding: "utf8" }).split("\n");
    const gated = files.filter((f) => f && /skipIf\(!\s*(hasKvm|kvm)\b/.test(readFileSync(join(root, f), "utf8")));
    expect(gated.length).toBeGreaterThan(5);
    expect(gated.filter((f) => !(L1_SUITES as readonly string[]).includes(f))).toEqual([]);
  });

  it("makes the vm-cirros VMI from the seed's manifest, user data and demo containerDisk unchanged", () => {
    const vmi = seedVmi({ namespace: "default", uid: "5f0c6b1e-0000-4000-8000-000000000001" });
    expect(vmi.metadata).toMatchObject({
      name: "vm-cirros",
      namespace: "default",
      uid: "5f0c6b1e-0000-4000-8000-000000000001",
    });
    expect(vmi.metadata?.labels?.["kubevirt.io/vm"]).toBe("vm-cirros");
    expect(vmi.spec?.volumes?.find((v) => v.containerDisk)?.containerDisk?.image).toBe(DEMO_CONTAINER_DISK);
    expect(userDataOf(vmi)).toBe("#!/bin/sh\n\necho 'printed from cloud-init userdata'\n");
    // The mutating webhooks' defaults: a firmware UUID from the VM mutator, memory.guest from the request.
    expect(vmi.spec?.domain.firmware?.uuid).toMatch(/^[0-9a-f-]{36}$/);
    expect(vmi.spec?.domain.memory?.guest).toBe("64M");
    const elsewhere = readFileSync(SEED_VM_MANIFEST, "utf8").replace(
      DEMO_CONTAINER_DISK,
      "quay.io/kubevirt/cirros-container-disk-demo",
    );
    expect(() => seedVmi({ namespace: "default", uid: "u" }, elsewhere)).toThrow(/not the demo image/);
  });
});
