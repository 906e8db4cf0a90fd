import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type AptRunner, HostToolError, hostToolInstaller, onPath } from "./host-tools.ts";

const LOCK = ["-o", "DPkg::Lock::Timeout=600"];
const install = (...pkgs: string[]): string[] => [...LOCK, "install", "-y", "--no-install-recommends", ...pkgs];
const update = [...LOCK, "update"];

let bin: string;
beforeEach(() => {
  bin = mkdtempSync(join(tmpdir(), "kvt-host-tools-"));
});
afterEach(() => rmSync(bin, { recursive: true, force: true }));

const put = (name: string, mode = 0o755): void => writeFileSync(join(bin, name), "#!/bin/true\n", { mode });

/**
 * A stand-in for apt-get: records each call; `install` "installs" a package by putting its programs into the PATH
 * directory, after `gate` (when set) resolves; `fail` picks the calls that fail.
 */
function fakeApt(
  provides: Record<string, string[]>,
  opts: { fail?: (args: readonly string[], index: number) => boolean; gate?: Promise<void> } = {},
): { calls: string[][]; run: AptRunner } {
  const calls: string[][] = [];
  const run: AptRunner = async (args) => {
    const index = calls.push([...args]) - 1;
    await opts.gate;
    if (opts.fail?.(args, index)) throw new Error(`E: Unable to locate package (call ${index})`);
    if (!args.includes("install")) return;
    for (const pkg of args.slice(install().length)) for (const b of provides[pkg] ?? []) put(b);
  };
  return { calls, run };
}

describe("onPath()", () => {
  it("finds executable regular files in PATH's directories, in process", () => {
    put("qemu-system-x86_64");
    put("not-executable", 0o644);
    mkdirSync(join(bin, "a-directory"));
    const path = `/nonexistent::${bin}`;
    expect(onPath("qemu-system-x86_64", path)).toBe(true);
    expect(onPath("not-executable", path)).toBe(false);
    expect(onPath("a-directory", path)).toBe(false);
    expect(onPath("qemu-system-x86_64", "/nonexistent")).toBe(false);
    expect(onPath(join(bin, "qemu-system-x86_64"), "/nonexistent")).toBe(true);
  });

  it("takes a path as a file the package installs, a program or not (libc6-dev's libc.a)", () => {
    put("libc.a", 0o644);
    mkdirSync(join(bin, "a-directory"));
    expect(onPath(join(bin, "libc.a"), "/nonexistent")).toBe(true);
    expect(onPath(join(bin, "a-directory"), "/nonexistent")).toBe(false);
    expect(onPath(join(bin, "missing.a"), "/nonexistent")).toBe(false);
  });
});

describe("hostToolInstaller()", () => {
  it("installs the union of the missing programs' packages in one apt-get call, each package once", async () => {
    put("present");
    const apt = fakeApt({ binutils: ["readelf", "strip"], umoci: ["umoci"] });
    const lines: string[] = [];
    const ensure = hostToolInstaller({ runApt: apt.run, isRoot: () => true, path: () => bin });
    await ensure(
      [
        { bin: "readelf", pkg: "binutils" },
        { bin: "present", pkg: "present-pkg" },
        { bin: "strip", pkg: "binutils" },
        { bin: "umoci", pkg: "umoci" },
      ],
      (l) => lines.push(l),
    );
    expect(apt.calls).toEqual([install("binutils", "umoci")]);
    expect(lines).toEqual(["installing Debian packages: binutils umoci"]);
    await ensure([{ bin: "umoci", pkg: "umoci" }]);
    expect(apt.calls).toHaveLength(1);
  });

  it("names the exact command to run when a program is missing and this is not root", async () => {
    const apt = fakeApt({});
    const ensure = hostToolInstaller({ runApt: apt.run, isRoot: () => false, path: () => bin });
    const err = await ensure([
      { bin: "kvt-no-such-qemu", pkg: "qemu-system-x86" },
      { bin: "qemu-img", pkg: "qemu-utils" },
    ]).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HostToolError);
    expect((err as HostToolError).command).toBe(
      "apt-get install -y --no-install-recommends qemu-system-x86 qemu-utils",
    );
    expect((err as Error).message).toBe(
      "kvt-no-such-qemu, qemu-img not installed (Debian: qemu-system-x86 qemu-utils); " +
        "as root run: apt-get install -y --no-install-recommends qemu-system-x86 qemu-utils",
    );
    expect(apt.calls).toEqual([]);
  });

  it("runs apt-get update and retries the install once when the first install fails", async () => {
    const apt = fakeApt({ skopeo: ["skopeo"] }, { fail: (_, i) => i === 0 });
    const lines: string[] = [];
    const ensure = hostToolInstaller({ runApt: apt.run, isRoot: () => true, path: () => bin });
    await ensure([{ bin: "skopeo", pkg: "skopeo" }], (l) => lines.push(l));
    expect(apt.calls).toEqual([install("skopeo"), update, install("skopeo")]);
    expect(lines[1]).toMatch(
      /^apt-get install failed \(E: Unable to locate package \(call 0\)\); running apt-get update/,
    );
    expect(onPath("skopeo", bin)).toBe(true);
  });

  it("throws the command to run, with apt-get's error as the cause, when the retry fails too", async () => {
    const apt = fakeApt({}, { fail: (_, i) => i === 0 || i === 2 });
    const ensure = hostToolInstaller({ runApt: apt.run, isRoot: () => true, path: () => bin });
    const err = (await ensure([{ bin: "fuseiso", pkg: "fuseiso" }]).catch((e: unknown) => e)) as HostToolError;
    expect(err).toBeInstanceOf(HostToolError);
    expect(err.command).toBe("apt-get update && apt-get install -y --no-install-recommends fuseiso");
    expect(err.message).toMatch(/^Cannot install fuseiso for fuseiso: E: Unable to locate package \(call 2\); as root/);
    expect((err.cause as Error).message).toContain("call 2");
    expect(apt.calls).toEqual([install("fuseiso"), update, install("fuseiso")]);
  });

  it("says which programs a successful install did not provide", async () => {
    const apt = fakeApt({ "qemu-utils": ["qemu-img"] });
    const ensure = hostToolInstaller({ runApt: apt.run, isRoot: () => true, path: () => bin });
    const err = await ensure([
      { bin: "qemu-img", pkg: "qemu-utils" },
      { bin: "qemu-io", pkg: "qemu-utils" },
    ]).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HostToolError);
    expect((err as Error).message).toMatch(/^qemu-io still not on PATH \(.*\) after installing qemu-utils: `dpkg -L/);
  });

  it("dedupes concurrent calls: a package being installed is waited for, not installed again", async () => {
    let release = (): void => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const apt = fakeApt({ a: ["a"], b: ["b"], c: ["c"] }, { gate });
    const ensure = hostToolInstaller({ runApt: apt.run, isRoot: () => true, path: () => bin });
    const ab = [
      { bin: "a", pkg: "a" },
      { bin: "b", pkg: "b" },
    ];
    const calls = [ensure(ab), ensure(ab), ensure([...ab.slice(1), { bin: "c", pkg: "c" }])];
    release();
    await Promise.all(calls);
    expect(apt.calls).toEqual([install("a", "b"), install("c")]);
    for (const b of ["a", "b", "c"]) expect(onPath(b, bin)).toBe(true);
  });

  it("reports a shared install's failure to every caller waiting on it, naming each one's packages", async () => {
    let release = (): void => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const apt = fakeApt({ y: ["y"] }, { fail: (args) => args.includes("x"), gate });
    const ensure = hostToolInstaller({ runApt: apt.run, isRoot: () => true, path: () => bin });
    const first = ensure([{ bin: "x", pkg: "x" }]).catch((e: unknown) => e);
    const second = ensure([
      { bin: "x", pkg: "x" },
      { bin: "y", pkg: "y" },
    ]).catch((e: unknown) => e);
    release();
    expect(((await first) as HostToolError).command).toBe(
      "apt-get update && apt-get install -y --no-install-recommends x",
    );
    expect(((await second) as HostToolError).command).toBe(
      "apt-get update && apt-get install -y --no-install-recommends x y",
    );
    // x was installed by one call only (and retried once after the update); y by the second call, on its own.
    expect(apt.calls.filter((c) => c.includes("x"))).toEqual([install("x"), install("x")]);
    expect(apt.calls.filter((c) => c.includes("y"))).toEqual([install("y")]);
    expect(onPath("y", bin)).toBe(true);
  });
});
