import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { machineCache, machineCacheKey, machineCacheRoot } from "./machine-cache.ts";

const dirs: string[] = [];
function tmp(): string {
  const d = mkdtempSync(join(tmpdir(), "kvt-mc-"));
  dirs.push(d);
  return d;
}
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function tree(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (d: string, rel: string): void => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const r = rel ? `${rel}/${e.name}` : e.name;
      if (e.isDirectory()) walk(join(d, e.name), r);
      else out[r] = readFileSync(join(d, e.name), "utf8");
    }
  };
  walk(dir, "");
  return out;
}

describe("machineCache", () => {
  it("restores exactly what was saved under the key, into a fresh directory", () => {
    const root = tmp();
    const built = tmp();
    mkdirSync(join(built, "sub"));
    writeFileSync(join(built, "a.bin"), "A", { mode: 0o755 });
    writeFileSync(join(built, "sub/b.txt"), "B");
    writeFileSync(join(built, "skip.log"), "L");
    const cache = machineCache("kube-bin", { root });
    expect(cache.restore("k1", join(tmp(), "x"))).toBe(false);
    cache.save("k1", built, (rel) => !rel.endsWith(".log"));
    const clone = join(tmp(), "bin");
    expect(cache.restore("k1", clone)).toBe(true);
    expect(tree(clone)).toEqual({ "a.bin": "A", "sub/b.txt": "B" });
    expect(statSync(join(clone, "a.bin")).mode & 0o777).toBe(0o755);
    // A rebuild in the clone writes a new file and renames it over the restored one: the entry keeps its bytes.
    writeFileSync(join(clone, "a.bin.tmp"), "A2");
    renameSync(join(clone, "a.bin.tmp"), join(clone, "a.bin"));
    expect(cache.restore("k1", join(tmp(), "again"))).toBe(true);
    expect(readFileSync(join(cache.pathOf("k1"), "a.bin"), "utf8")).toBe("A");
    expect(cache.restore("k2", join(tmp(), "y"))).toBe(false);
  });

  it("keeps the most recently used entries of a kind and drops a dead save's leftovers", () => {
    const root = tmp();
    const built = tmp();
    writeFileSync(join(built, "f"), "1");
    const cache = machineCache("images", { root, keep: 2 });
    cache.save("old", built);
    cache.save("mid", built);
    utimesSync(join(root, "images/old"), new Date(1000), new Date(1000));
    utimesSync(join(root, "images/mid"), new Date(2000), new Date(2000));
    mkdirSync(join(root, "images/.tmp-1-dead"));
    utimesSync(join(root, "images/.tmp-1-dead"), new Date(1000), new Date(1000));
    cache.restore("old", join(tmp(), "r")); // used now: newer than mid
    cache.save("new", built);
    expect(readdirSync(join(root, "images")).sort()).toEqual(["new", "old"]);
  });

  it("is off with KVT_MACHINE_CACHE=off, and refuses keys and kinds that are not plain names", () => {
    expect(machineCacheRoot({ KVT_MACHINE_CACHE: "off" })).toBeUndefined();
    expect(machineCacheRoot({ XDG_CACHE_HOME: "/x" })).toBe("/x/kubevirt-ts");
    expect(machineCacheRoot({ KVT_MACHINE_CACHE: "/y", XDG_CACHE_HOME: "/x" })).toBe("/y");
    const built = tmp();
    writeFileSync(join(built, "f"), "1");
    const before = process.env.KVT_MACHINE_CACHE;
    process.env.KVT_MACHINE_CACHE = "off";
    try {
      const off = machineCache("images");
      off.save("k", built);
      expect(off.restore("k", tmp())).toBe(false);
    } finally {
      if (before === undefined) delete process.env.KVT_MACHINE_CACHE;
      else process.env.KVT_MACHINE_CACHE = before;
    }
    expect(() => machineCache("../etc")).toThrow(/invalid machine cache kind/);
    expect(() => machineCache("images", { root: tmp() }).restore("../k", tmp())).toThrow(/invalid machine cache key/);
  });

  it("keys on every part and on the contents of the builder's sources", () => {
    const d = tmp();
    writeFileSync(join(d, "build.ts"), "v1");
    const k1 = machineCacheKey(["v1.37.2", "go1.25"], [join(d, "build.ts")]);
    expect(machineCacheKey(["v1.37.2", "go1.25"], [join(d, "build.ts")])).toBe(k1);
    expect(machineCacheKey(["v1.37.2", "go1.26"], [join(d, "build.ts")])).not.toBe(k1);
    expect(machineCacheKey(["v1.37.2go1.25"], [join(d, "build.ts")])).not.toBe(k1);
    writeFileSync(join(d, "build.ts"), "v2");
    expect(machineCacheKey(["v1.37.2", "go1.25"], [join(d, "build.ts")])).not.toBe(k1);
    expect(k1).toMatch(/^[0-9a-f]{32}$/);
  });
});
