import { describe, expect, it } from "vitest";
import { jsRuntime, runtimeFlags, runtimeNameOf } from "./js-runtime.ts";

describe("runtimeFlags()", () => {
  it("passes Node flags to Node as they are", () => {
    expect(runtimeFlags("node", ["--max-semi-space-size=1", "--v8-pool-size=1"])).toEqual([
      "--max-semi-space-size=1",
      "--v8-pool-size=1",
    ]);
  });

  it("gives Deno the V8 flags in one --v8-flags and drops Node-only ones", () => {
    expect(runtimeFlags("deno", ["--max-semi-space-size=1", "--v8-pool-size=1", "--enable-source-maps"])).toEqual([
      "--v8-flags=--max-semi-space-size=1",
    ]);
    expect(runtimeFlags("deno", ["--v8-pool-size=1"])).toEqual([]);
  });
});

describe("jsRuntime()", () => {
  it("runs Deno as `deno run -A` from the project's node_modules unless Deno runs us", () => {
    const deno = jsRuntime("deno", "/repo");
    expect(deno.execArgs).toEqual(["run", "-A"]);
    expect(runtimeNameOf(deno.execPath)).toBe("deno");
    expect(jsRuntime("node", "/repo").execArgs).toEqual([]);
  });
});
