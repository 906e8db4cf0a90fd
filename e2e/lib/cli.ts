/**
 * Runs the real `kubectl` (the machine's, as a user would) and our `virtctl` against the e2e cluster, each with an
 * isolated HOME so kubectl's discovery cache never leaks between runs.
 */
import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** The result of one command. */
export interface CommandResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

const home = mkdtempSync(join(tmpdir(), "kvt-e2e-home-"));
const root = new URL("../../", import.meta.url).pathname;

function run(
  cmd: string,
  args: readonly string[],
  kubeconfig: string,
  input?: string,
  timeoutMs = 60_000,
  { cwd, until }: { cwd?: string; until?: RegExp } = {},
): Promise<CommandResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, {
      cwd,
      env: { ...process.env, KUBECONFIG: kubeconfig, HOME: home },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => {
      stdout += d.toString();
      // A session that never ends by itself (a console) ends once its answer arrived.
      if (until?.test(stdout)) child.kill("SIGKILL");
    });
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code: code ?? 137, stdout, stderr });
    });
    // A command that exits without reading its input (kubectl refusing its arguments) closes the pipe: EPIPE here
    // is not the test's failure, the command's exit code and stderr say what happened.
    child.stdin.on("error", () => {});
    child.stdin.end(input ?? "");
  });
}

/** `kubectl <args>` against the cluster in `kubeconfig` (killed after `timeoutMs`, default 60 s). */
export function kubectl(
  kubeconfig: string,
  args: readonly string[],
  input?: string,
  timeoutMs?: number,
): Promise<CommandResult> {
  return run("kubectl", args, kubeconfig, input, timeoutMs);
}

/** `kubectl <args>` run in directory `cwd` (for a user's `kubectl create -f vm.yaml`). */
export function kubectlIn(cwd: string, kubeconfig: string, args: readonly string[]): Promise<CommandResult> {
  return run("kubectl", args, kubeconfig, undefined, 60_000, { cwd });
}

/** `virtctl <args>` (this repository's, on the project's Node) against the cluster in `kubeconfig`. */
export function virtctl(
  kubeconfig: string,
  args: readonly string[],
  input?: string,
  timeoutMs?: number,
  until?: RegExp,
): Promise<CommandResult> {
  return run(process.execPath, [join(root, "apps/virtctl/src/main.ts"), ...args], kubeconfig, input, timeoutMs, {
    until,
  });
}

/**
 * Runs `command` on VMI `name`'s console, then a line that prints `END-OF-COMMAND-<n>` for a number new to this call:
 * the session ends as soon as that line is printed, else after `ms`. The typed line's echo shows `$((<n - 1>+1))`, and
 * the console's replay of earlier sessions holds other numbers, so neither matches.
 */
export async function inConsole(
  kubeconfig: string,
  name: string,
  command: string,
  ms = 20_000,
): Promise<CommandResult> {
  const n = 1_000_000 + Math.floor(Math.random() * 8_000_000);
  const done = `; echo END-OF-COMMAND-$((${n - 1}+1))`;
  return virtctl(kubeconfig, ["console", name], `${command}${done}\r`, ms, new RegExp(`END-OF-COMMAND-${n}\\b`));
}

/** Like {@link kubectl}, but throws with kubectl's stderr unless it exits 0. */
export async function kubectlOk(kubeconfig: string, args: readonly string[], input?: string): Promise<string> {
  const r = await kubectl(kubeconfig, args, input);
  if (r.code !== 0) throw new Error(`kubectl ${args.join(" ")} exited ${r.code}: ${r.stderr.trim()}`);
  return r.stdout;
}

/** Reads an object as JSON with kubectl. */
export async function getJson<T>(
  kubeconfig: string,
  resource: string,
  name?: string,
  namespace = "default",
): Promise<T> {
  const args = ["get", resource, ...(name ? [name] : []), "-n", namespace, "-o", "json"];
  return JSON.parse(await kubectlOk(kubeconfig, args)) as T;
}

/** A long-running `kubectl` (e.g. `get -w`) whose output is collected until {@link Watch.stop}. */
export interface Watch {
  /** Everything printed on stdout so far. */
  output(): string;
  /** Ends the process and returns its whole stdout. */
  stop(): Promise<string>;
}

/** Starts `kubectl <args>` in the background (for `kubectl get ... -w`), killed by `stop()` or after `timeoutMs`. */
export function kubectlWatch(kubeconfig: string, args: readonly string[], timeoutMs = 300_000): Watch {
  const child = spawn("kubectl", args, {
    env: { ...process.env, KUBECONFIG: kubeconfig, HOME: home },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
  const closed = new Promise<void>((resolve) => child.on("close", () => resolve()));
  const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
  return {
    output: () => stdout,
    stop: async () => {
      clearTimeout(timer);
      child.kill("SIGTERM");
      await closed;
      return stdout;
    },
  };
}

/**
 * Starts `kubectl <args>` with its stdin, stdout and stderr as pipes (an interactive `kubectl exec -i`); the caller
 * writes, reads and kills it.
 */
export function kubectlSession(kubeconfig: string, args: readonly string[]): ChildProcessWithoutNullStreams {
  return spawn("kubectl", args, { env: { ...process.env, KUBECONFIG: kubeconfig, HOME: home }, stdio: "pipe" });
}
