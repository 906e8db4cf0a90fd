import { createServer } from "node:net";
import { describe, expect, it } from "vitest";
import { ephemeralPortRange, freePort, pickRange } from "./free-port.ts";

describe("freePort", () => {
  it("picks bindable ports outside the kernel's ephemeral range, never the same one twice", async () => {
    const [low, high] = ephemeralPortRange();
    const ports = await Promise.all(Array.from({ length: 20 }, () => freePort()));
    expect(new Set(ports).size).toBe(20);
    for (const p of ports) expect(p < low || p > high, `${p} in ${low}-${high}`).toBe(true);
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(ports[0], "127.0.0.1", resolve));
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it("reads the range from /proc's format, with Linux's default when it cannot", () => {
    expect(ephemeralPortRange("32768\t60999\n")).toEqual([32768, 60999]);
    expect(ephemeralPortRange("1024 65000")).toEqual([1024, 65000]);
    expect(ephemeralPortRange("garbage")).toEqual([32768, 60999]);
  });

  it("picks below the range, or above it when too little fits below", () => {
    expect(pickRange([32768, 60999])).toEqual([10000, 32767]);
    expect(pickRange([10500, 50000])).toEqual([50001, 65535]);
    expect(pickRange([1024, 65000])).toEqual([10000, 65535]);
  });
});
