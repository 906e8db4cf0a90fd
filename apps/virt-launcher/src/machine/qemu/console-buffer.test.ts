import { describe, expect, it } from "vitest";
import { ConsoleScrollback } from "./console-buffer.ts";

describe("ConsoleScrollback", () => {
  it("keeps only the newest bytes", () => {
    const sb = new ConsoleScrollback(5);
    sb.push(new TextEncoder().encode("abc"));
    sb.push(new TextEncoder().encode("defg"));
    expect(new TextDecoder().decode(sb.snapshot())).toBe("cdefg");
  });
});
