import { describe, expect, it } from "vitest";
import { CCACHE, ensureCompilerCache } from "./compiler-cache.ts";

describe("ensureCompilerCache", () => {
  it("asks for ccache and is quiet when it is there", async () => {
    const asked: unknown[] = [];
    const result = await ensureCompilerCache(
      () => {},
      async (tools) => {
        asked.push(...tools);
      },
    );
    expect(result).toBeUndefined();
    expect(asked).toEqual([CCACHE]);
  });

  it("says the build goes on without it, and why, when it cannot be installed", async () => {
    const result = await ensureCompilerCache(
      () => {},
      async () => {
        throw new Error("missing ccache; as root run: apt-get install -y --no-install-recommends ccache");
      },
    );
    expect(result).toMatch(/^native\/ builds without ccache .*: missing ccache; as root run: apt-get install/);
  });
});
