/**
 * Kernel-module dependency resolution for the initramfs, from the `.ko` files of a Debian kernel package (which ships
 * no modules.dep: depmod runs at install time). Each module's `.modinfo` section holds NUL-separated `key=value`
 * strings; `depends=a,b` names the modules it needs. We read that and order the modules so dependencies load first.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";

/** A module found in the kernel tree: its canonical name (dashes as underscores) and path below `modulesDir`. */
export interface KernelModule {
  readonly name: string;
  readonly relPath: string;
  readonly depends: readonly string[];
}

/** Canonical module name: `virtio-blk` and `virtio_blk` are the same module to the kernel. */
export function canonicalModuleName(name: string): string {
  return name.replaceAll("-", "_");
}

/** The `depends=` list of a module image (empty when it has none). */
export function moduleDepends(ko: Uint8Array): string[] {
  const text = Buffer.from(ko.buffer, ko.byteOffset, ko.byteLength).toString("latin1");
  const at = text.indexOf("\0depends=");
  if (at < 0) return [];
  const end = text.indexOf("\0", at + 1);
  const value = text.slice(at + "\0depends=".length, end < 0 ? undefined : end);
  return value === "" ? [] : value.split(",").map(canonicalModuleName);
}

function walk(dir: string, out: string[]): void {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) walk(p, out);
    else if (e.name.endsWith(".ko")) out.push(p);
  }
}

/** Index of every `.ko` below `modulesDir` (e.g. `<root>/lib/modules/<version>`), by canonical name. */
export function indexModules(modulesDir: string): Map<string, string> {
  const files: string[] = [];
  walk(modulesDir, files);
  const index = new Map<string, string>();
  for (const f of files) {
    const base = f.slice(f.lastIndexOf("/") + 1, -".ko".length);
    index.set(canonicalModuleName(base), relative(modulesDir, f));
  }
  return index;
}

/**
 * The modules `wanted` needs, dependencies first, each once. Names the kernel has built in (listed in
 * `modules.builtin`) are skipped; a name that is neither a module nor built in is an error.
 */
export function resolveModules(
  modulesDir: string,
  wanted: readonly string[],
  builtin: ReadonlySet<string>,
): KernelModule[] {
  const index = indexModules(modulesDir);
  const ordered: KernelModule[] = [];
  const state = new Map<string, "visiting" | "done">();
  const visit = (raw: string, chain: readonly string[]): void => {
    const name = canonicalModuleName(raw);
    if (state.get(name) === "done") return;
    if (state.get(name) === "visiting") throw new Error(`module dependency cycle: ${[...chain, name].join(" -> ")}`);
    const relPath = index.get(name);
    if (relPath === undefined) {
      if (builtin.has(name)) return;
      throw new Error(
        `kernel module "${name}" not found below ${modulesDir} (needed by ${chain.join(" -> ") || "the image"})`,
      );
    }
    state.set(name, "visiting");
    const depends = moduleDepends(readFileSync(join(modulesDir, relPath)));
    for (const d of depends) visit(d, [...chain, name]);
    state.set(name, "done");
    ordered.push({ name, relPath, depends });
  };
  for (const w of wanted) visit(w, []);
  return ordered;
}

/** The built-in module names from a `modules.builtin` file's text (`kernel/drivers/x/y.ko` lines). */
export function parseBuiltin(text: string): Set<string> {
  const out = new Set<string>();
  for (const line of text.split("\n")) {
    const base = line.trim().split("/").pop();
    if (base?.endsWith(".ko")) out.add(canonicalModuleName(base.slice(0, -3)));
  }
  return out;
}
