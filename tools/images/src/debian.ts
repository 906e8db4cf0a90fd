/**
 * Debian package plumbing for the image builder: resolve a package's candidate version, download it with
 * `apt-get download` into a cache, unpack it with `dpkg -x`. Only Debian's own tools and mirror are used.
 * When the package lists are missing, `apt-get update` runs if we are root; otherwise the error names the command.
 */
import { execFile } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

/** A failure to get something from Debian, with the command a user can run to fix it. */
export class DebianToolError extends Error {
  /** The command that would fix it (e.g. `sudo apt-get update`), when there is one. */
  readonly fix?: string;
  constructor(message: string, fix?: string) {
    super(fix ? `${message}; run: ${fix}` : message);
    this.name = "DebianToolError";
    this.fix = fix;
  }
}

/** A resolved package: the name apt knows and the version it would install. */
export interface DebianPackage {
  readonly name: string;
  readonly version: string;
}

function isRoot(): boolean {
  return typeof process.getuid === "function" && process.getuid() === 0;
}

/**
 * The apt records shown so far in this process, by package name. Each apt-cache call loads apt's whole cache (about
 * half a second here), and an image build resolves some 20 packages, each image check again: one call per batch of
 * names, and none for a name already shown. Versions change only with `apt-get update`, which this process runs at
 * most once, before any record of the names it looked for could be kept.
 */
const shown = new Map<string, string>();

/** Shows the records of `names` not shown yet, in one apt-cache call; names apt does not know stay unshown. */
async function aptCacheShow(names: readonly string[]): Promise<void> {
  const missing = [...new Set(names)].filter((n) => !shown.has(n));
  if (missing.length === 0) return;
  let stdout: string;
  try {
    ({ stdout } = await run("apt-cache", ["show", "--no-all-versions", ...missing], { maxBuffer: 64 << 20 }));
  } catch (err) {
    // One unknown name fails the call (exit 100); the others' records are still printed.
    stdout = (err as { stdout?: string }).stdout ?? "";
  }
  for (const record of stdout.split(/\n\s*\n/)) {
    const name = field(record, "Package");
    if (name && missing.includes(name) && !shown.has(name)) shown.set(name, record.trim());
  }
}

function field(record: string, name: string): string | undefined {
  const m = new RegExp(`^${name}: (.*)$`, "m").exec(record);
  return m?.[1]?.trim();
}

async function updateLists(name: string): Promise<void> {
  if (!isRoot())
    throw new DebianToolError(
      `apt does not know the package "${name}" (package lists missing?)`,
      "sudo apt-get update",
    );
  await run("apt-get", ["update"], { maxBuffer: 64 << 20 });
}

/** The apt records of `names`, in order; runs `apt-get update` once when root and the lists lack one. */
async function showWithUpdate(names: readonly string[]): Promise<string[]> {
  await aptCacheShow(names);
  const unknown = names.find((n) => !shown.has(n));
  if (unknown !== undefined) {
    await updateLists(unknown);
    await aptCacheShow(names);
  }
  return names.map((name) => {
    const record = shown.get(name);
    if (!record) throw new DebianToolError(`apt does not know "${name}" even after apt-get update`);
    return record;
  });
}

/** The candidate versions of `names`, in their order, from one apt-cache call for those not shown before. */
export async function resolvePackages(names: readonly string[]): Promise<DebianPackage[]> {
  const records = await showWithUpdate(names);
  return names.map((name, i) => {
    const version = field(records[i] ?? "", "Version");
    if (!version) throw new DebianToolError(`no installable version of "${name}"`);
    return { name, version };
  });
}

/** The candidate version of `name`. */
export async function resolvePackage(name: string): Promise<DebianPackage> {
  const [pkg] = await resolvePackages([name]);
  if (!pkg) throw new DebianToolError(`no installable version of "${name}"`);
  return pkg;
}

/**
 * Resolves a metapackage such as `linux-image-amd64` to the real, versioned package it depends on
 * (`linux-image-6.1.0-50-amd64`), which is the one holding the files.
 */
export async function resolveMetaPackage(meta: string, pattern: RegExp): Promise<DebianPackage> {
  const [record] = await showWithUpdate([meta]);
  const depends = field(record ?? "", "Depends") ?? "";
  const target = depends
    .split(/[,|]/)
    .map((d) => d.trim().split(/\s/)[0] ?? "")
    .find((d) => pattern.test(d));
  if (!target) throw new DebianToolError(`"${meta}" depends on no package matching ${pattern} (Depends: ${depends})`);
  return resolvePackage(target);
}

/** Downloads `pkg` (exact version) into `<cacheDir>/<name>_<version>/` unless already there; returns the .deb path. */
export async function downloadPackage(pkg: DebianPackage, cacheDir: string): Promise<string> {
  const dir = join(cacheDir, `${pkg.name}_${pkg.version.replaceAll(":", "%3a")}`);
  const found = existsSync(dir) ? readdirSync(dir).find((f) => f.endsWith(".deb")) : undefined;
  if (found) return join(dir, found);
  const tmp = `${dir}.partial`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  try {
    await run("apt-get", ["download", `${pkg.name}=${pkg.version}`], { cwd: tmp, maxBuffer: 16 << 20 });
  } catch (err) {
    rmSync(tmp, { recursive: true, force: true });
    const detail = err instanceof Error ? err.message : String(err);
    throw new DebianToolError(
      `apt-get download ${pkg.name}=${pkg.version} failed: ${detail}`,
      isRoot() ? undefined : "sudo apt-get update",
    );
  }
  const deb = readdirSync(tmp).find((f) => f.endsWith(".deb"));
  if (!deb) throw new DebianToolError(`apt-get download ${pkg.name} produced no .deb`);
  rmSync(dir, { recursive: true, force: true });
  renameSync(tmp, dir);
  return join(dir, deb);
}

/** Unpacks a .deb's files into `dest` (`dpkg -x`), replacing what was there. */
export async function extractPackage(deb: string, dest: string): Promise<void> {
  rmSync(dest, { recursive: true, force: true });
  mkdirSync(dest, { recursive: true });
  try {
    await run("dpkg", ["-x", deb, dest], { maxBuffer: 16 << 20 });
  } catch (err) {
    const detail = err instanceof Error ? err.message : String(err);
    throw new DebianToolError(`dpkg -x ${deb} failed: ${detail}`);
  }
}
