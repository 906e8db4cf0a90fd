/**
 * Running an image under a real OCI runtime, for tests: unpack it into a runtime bundle (umoci unpack: rootfs/ and
 * config.json with the image's entrypoint, user and environment, and the usual namespaces: pid, network, ipc, uts,
 * mount), adjust the process, then `crun run`, or `runc run` where crun cannot run here.
 *
 * crun 1.8 (Debian 12) refuses hosts whose cgroup layout is "hybrid" with controllers on the v2 hierarchy
 * ("cgroups in hybrid mode not supported, drop all controllers from cgroupv2"), even with `--cgroup-manager=disabled`;
 * runc 1.1 (Debian 12) runs there. {@link pickRuntime} tries crun first and says why it fell back.
 */
import { spawn, spawnSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { run } from "./host-tools.ts";

/** The runtime that works on this host, and why crun was not it (when it was not). */
export interface RuntimeChoice {
  readonly runtime: "crun" | "runc";
  readonly crunFailure?: string;
}

/** A bind mount into the container. */
export interface BindMount {
  readonly source: string;
  readonly destination: string;
}

/** What runs in the container. */
export interface ContainerProcess {
  /** Replace the image's entrypoint + cmd (default: keep it). */
  readonly args?: readonly string[];
  /** Arguments appended to the image's entrypoint + cmd. */
  readonly extraArgs?: readonly string[];
  readonly mounts?: readonly BindMount[];
}

/** Result of {@link runContainer}. */
export interface ContainerResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Unpacks `ref` (`layout:tag`) into the runtime bundle `bundleDir`. */
export async function unpackImage(ref: string, bundleDir: string): Promise<void> {
  await run("umoci", ["unpack", "--image", ref, bundleDir]);
}

interface RuntimeSpec {
  process: { args: string[]; terminal?: boolean };
  mounts: { destination: string; type: string; source: string; options?: string[] }[];
}

/** Rewrites the bundle's config.json for `proc`: the arguments, no terminal, read-only bind mounts. */
export function prepareBundle(bundleDir: string, proc: ContainerProcess): void {
  const file = join(bundleDir, "config.json");
  const spec = JSON.parse(readFileSync(file, "utf8")) as RuntimeSpec;
  spec.process.args = [...(proc.args ?? spec.process.args), ...(proc.extraArgs ?? [])];
  spec.process.terminal = false;
  for (const m of proc.mounts ?? []) {
    spec.mounts.push({ destination: m.destination, type: "bind", source: m.source, options: ["rbind", "ro"] });
  }
  writeFileSync(file, JSON.stringify(spec, null, 2));
}

/** The OCI runtime to use here: crun when it can create a container on this host, else runc. */
export function pickRuntime(probeBundle: string): RuntimeChoice {
  const id = `kvt-probe-${process.pid}`;
  const r = spawnSync("crun", ["run", "--bundle", probeBundle, id], { encoding: "utf8", timeout: 30_000 });
  spawnSync("crun", ["delete", "-f", id], { stdio: "ignore" });
  if (r.status === 0) return { runtime: "crun" };
  return { runtime: "runc", crunFailure: (r.stderr || r.error?.message || `exit ${r.status}`).trim() };
}

/**
 * Runs the bundle's process to its end under `runtime` and returns its output; when `until` matches the output so
 * far, the container is killed (for processes that never exit on their own, such as a booted guest).
 */
export function runContainer(
  runtime: string,
  bundleDir: string,
  id: string,
  options: { readonly until?: RegExp; readonly timeoutMs?: number } = {},
): Promise<ContainerResult> {
  return new Promise((resolve) => {
    const child = spawn(runtime, ["run", "--bundle", bundleDir, id], { stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    let killed = false;
    const kill = (): void => {
      if (killed) return;
      killed = true;
      spawnSync(runtime, ["kill", id, "KILL"], { stdio: "ignore" });
    };
    const timer = setTimeout(kill, options.timeoutMs ?? 60_000);
    const check = (): void => {
      if (options.until?.test(stdout + stderr)) kill();
    };
    child.stdout.on("data", (c: Buffer) => {
      stdout += c.toString();
      check();
    });
    child.stderr.on("data", (c: Buffer) => {
      stderr += c.toString();
      check();
    });
    child.on("close", (code) => {
      clearTimeout(timer);
      spawnSync(runtime, ["delete", "-f", id], { stdio: "ignore" });
      resolve({ code, stdout, stderr });
    });
  });
}
