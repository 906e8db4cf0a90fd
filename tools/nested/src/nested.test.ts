import { describe, expect, it } from "vitest";
import { GuestConsole } from "./guest-console.ts";
import { moduleLoadOrder } from "./l1-image.ts";
import { parseBenchSamples, parseChecks } from "./results.ts";

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
});
