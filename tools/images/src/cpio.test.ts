import { describe, expect, it } from "vitest";
import { listCpio, writeCpio } from "./cpio.ts";
import { parseImageRef } from "./store.ts";

describe("writeCpio()", () => {
  it("round-trips files, directories, links and device nodes with 4-byte alignment", () => {
    const data = new TextEncoder().encode("hello");
    const archive = writeCpio([
      { kind: "dir", path: "bin" },
      { kind: "file", path: "bin/x", data, mode: 0o755 },
      { kind: "symlink", path: "bin/y", target: "x" },
      { kind: "chardev", path: "console", major: 5, minor: 1 },
    ]);
    expect(archive.length % 4).toBe(0);
    const entries = listCpio(archive);
    expect(entries.map((e) => e.path)).toEqual(["bin", "bin/x", "bin/y", "console"]);
    expect(entries[1]?.mode).toBe(0o100755);
    expect(new TextDecoder().decode(entries[1]?.data)).toBe("hello");
    expect(new TextDecoder().decode(entries[2]?.data)).toBe("x");
  });
  it("rejects absolute paths", () => {
    expect(() => writeCpio([{ kind: "dir", path: "/etc" }])).toThrow(/relative/);
  });
});

describe("parseImageRef()", () => {
  it.each([
    ["local/demo-linux:latest", "local/demo-linux", "latest"],
    ["local/test-guest", "local/test-guest", "latest"],
  ])("%s", (ref, repository, tag) => {
    expect(parseImageRef(ref)).toEqual({ repository, tag });
  });
  it.each(["../etc:x", "local/../x", "Local/X", "a//b", ""])("rejects %j", (ref) => {
    expect(() => parseImageRef(ref)).toThrow(/invalid image reference/);
  });
});
