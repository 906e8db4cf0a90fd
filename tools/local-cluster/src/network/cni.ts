/**
 * The runtime side of the CNI protocol (containernetworking/cni SPEC.md, version 1.0.0): how a container runtime
 * calls a plugin binary, and how a network configuration list is run plugin by plugin.
 *
 *   runtime ──exec──> $CNI_PATH/<type>
 *     env:   CNI_COMMAND=ADD|CHECK|DEL  CNI_CONTAINERID  CNI_NETNS  CNI_IFNAME  CNI_PATH
 *     stdin: the plugin's config  {cniVersion, name, type, ..., runtimeConfig?, prevResult?}
 *     stdout: ADD -> a result {cniVersion, interfaces, ips, routes, dns};  CHECK/DEL -> nothing
 *     exit != 0: stdout is an error {cniVersion, code, msg, details}
 *
 *   conflist ADD:   plugin[0] .. plugin[n-1], each given the previous one's result as prevResult
 *   conflist CHECK: same order, each given the cached ADD result as prevResult
 *   conflist DEL:   plugin[n-1] .. plugin[0], each given the cached ADD result (when there is one)
 *
 * Runtime config (capabilities such as `portMappings`) is passed to the plugins that declare the capability.
 */
import { spawn } from "node:child_process";
import { join } from "node:path";

/** The CNI spec version this runtime speaks (Debian 12's containernetworking-plugins 1.1.1 supports it). */
export const CNI_VERSION = "1.0.0";

/** One plugin's configuration in a list. */
export interface CniPluginConf {
  readonly type: string;
  readonly capabilities?: Readonly<Record<string, boolean>>;
  readonly [key: string]: unknown;
}

/** A network configuration list. */
export interface CniConfList {
  readonly cniVersion: string;
  readonly name: string;
  readonly plugins: readonly CniPluginConf[];
}

/** An address a plugin assigned (`address` in CIDR form). */
export interface CniIpConfig {
  readonly address: string;
  readonly gateway?: string;
  readonly interface?: number;
}

/** A plugin's ADD result. */
export interface CniResult {
  readonly cniVersion: string;
  readonly interfaces?: readonly { readonly name: string; readonly mac?: string; readonly sandbox?: string }[];
  readonly ips?: readonly CniIpConfig[];
  readonly routes?: readonly { readonly dst: string; readonly gw?: string }[];
  readonly dns?: Readonly<Record<string, unknown>>;
}

/** Who the network is attached for: the runtime's container id, its netns path and the interface name in it. */
export interface CniAttachment {
  readonly containerId: string;
  readonly netns: string;
  readonly ifName: string;
  /** CNI_ARGS pairs (a Kubernetes runtime passes K8S_POD_NAMESPACE, K8S_POD_NAME, ...; IgnoreUnknown is added). */
  readonly args?: Readonly<Record<string, string>>;
}

/** A plugin failed; `code` and `details` are the plugin's error fields (code 999 when it printed none). */
export class CniError extends Error {
  override name = "CniError";
  readonly code: number;
  readonly plugin: string;
  readonly command: string;
  constructor(plugin: string, command: string, code: number, message: string, options?: ErrorOptions) {
    super(`CNI plugin "${plugin}" ${command} failed (code ${code}): ${message}`, options);
    this.plugin = plugin;
    this.command = command;
    this.code = code;
  }
}

/** Runs CNI plugins found in `binDirs` (CNI_PATH). */
export class CniRuntime {
  readonly #binDirs: readonly string[];
  readonly #timeoutMs: number;

  /** `timeoutMs` bounds each plugin call (default 30 s); a plugin that hangs is killed and reported. */
  constructor(binDirs: readonly string[], timeoutMs = 30_000) {
    this.#binDirs = binDirs;
    this.#timeoutMs = timeoutMs;
  }

  /** ADD every plugin of `list` in order; resolves with the last result. */
  async add(list: CniConfList, at: CniAttachment, runtimeConfig: Record<string, unknown> = {}): Promise<CniResult> {
    let prev: CniResult | undefined;
    for (const plugin of list.plugins) {
      const out = await this.#invoke("ADD", pluginConfig(list, plugin, runtimeConfig, prev), at);
      prev = parseResult(plugin.type, out);
    }
    if (!prev) throw new TypeError(`CNI network "${list.name}" has no plugins`);
    return prev;
  }

  /** CHECK every plugin of `list` in order against the cached ADD result; rejects with a {@link CniError}. */
  async check(
    list: CniConfList,
    at: CniAttachment,
    cached: CniResult,
    runtimeConfig: Record<string, unknown> = {},
  ): Promise<void> {
    for (const plugin of list.plugins) {
      await this.#invoke("CHECK", pluginConfig(list, plugin, runtimeConfig, cached), at);
    }
  }

  /**
   * DEL every plugin of `list` in reverse order. A DEL must succeed when the resources are already gone (the spec),
   * so a missing netns is passed as an empty CNI_NETNS; every plugin is tried and the first failure is thrown.
   */
  async del(
    list: CniConfList,
    at: CniAttachment,
    cached: CniResult | undefined,
    runtimeConfig: Record<string, unknown> = {},
  ): Promise<void> {
    let first: Error | undefined;
    for (const plugin of [...list.plugins].reverse()) {
      try {
        await this.#invoke("DEL", pluginConfig(list, plugin, runtimeConfig, cached), at);
      } catch (err) {
        first ??= err as Error;
      }
    }
    if (first) throw first;
  }

  #invoke(command: string, config: Record<string, unknown>, at: CniAttachment): Promise<string> {
    const type = String(config.type);
    if (!/^[A-Za-z0-9._-]+$/.test(type)) throw new TypeError(`CNI plugin type "${type}" is not a file name`);
    const env = {
      PATH: process.env.PATH ?? "/usr/sbin:/usr/bin:/sbin:/bin",
      CNI_COMMAND: command,
      CNI_CONTAINERID: at.containerId,
      CNI_NETNS: at.netns,
      CNI_IFNAME: at.ifName,
      CNI_PATH: this.#binDirs.join(":"),
      ...(at.args ? { CNI_ARGS: cniArgs(at.args) } : {}),
    };
    return runPlugin(this.#findPlugin(type), command, type, env, JSON.stringify(config), this.#timeoutMs);
  }

  #findPlugin(type: string): string {
    // The first directory of CNI_PATH wins, as in libcni; the spawn error names a plugin found nowhere.
    return join(this.#binDirs[0] ?? "/usr/lib/cni", type);
  }
}

/** CNI_ARGS from pairs: `IgnoreUnknown=1;K=V;...` (values may not hold ";" or "="). */
export function cniArgs(args: Readonly<Record<string, string>>): string {
  const pairs = Object.entries(args).map(([k, v]) => {
    if (/[;=]/.test(k) || /[;=]/.test(v)) throw new TypeError(`CNI_ARGS pair ${k}=${v} holds ";" or "="`);
    return `${k}=${v}`;
  });
  return ["IgnoreUnknown=1", ...pairs].join(";");
}

/** The stdin config of one plugin of a list: the list's name and version, runtime config for its capabilities. */
export function pluginConfig(
  list: CniConfList,
  plugin: CniPluginConf,
  runtimeConfig: Record<string, unknown>,
  prevResult: CniResult | undefined,
): Record<string, unknown> {
  const { capabilities, ...rest } = plugin;
  const granted = Object.fromEntries(
    Object.entries(runtimeConfig).filter(([k]) => capabilities?.[k] === true && runtimeConfig[k] !== undefined),
  );
  return {
    ...rest,
    cniVersion: list.cniVersion,
    name: list.name,
    ...(Object.keys(granted).length > 0 ? { runtimeConfig: granted } : {}),
    ...(prevResult ? { prevResult } : {}),
  };
}

/** Parses a plugin's ADD output; a plugin printing something else is a {@link CniError}. */
export function parseResult(plugin: string, stdout: string): CniResult {
  let parsed: unknown;
  try {
    parsed = JSON.parse(stdout);
  } catch {
    throw new CniError(plugin, "ADD", 999, `result is not JSON: ${stdout.slice(0, 200)}`);
  }
  if (typeof parsed !== "object" || parsed === null || typeof (parsed as CniResult).cniVersion !== "string")
    throw new CniError(plugin, "ADD", 999, "result has no cniVersion");
  return parsed as CniResult;
}

/** The plugin's error from its stdout (the spec's error object), or a generic one carrying stderr. */
export function pluginError(plugin: string, command: string, stdout: string, stderr: string, exit: string): CniError {
  try {
    const e = JSON.parse(stdout) as { code?: unknown; msg?: unknown; details?: unknown };
    if (typeof e.code === "number" && typeof e.msg === "string") {
      return new CniError(
        plugin,
        command,
        e.code,
        typeof e.details === "string" && e.details ? `${e.msg}: ${e.details}` : e.msg,
      );
    }
  } catch {
    // Not the spec's error object: fall through to the generic error with what the plugin printed.
  }
  const text = (stderr || stdout).trim().split("\n").slice(-4).join("; ");
  return new CniError(plugin, command, 999, `${exit}${text ? `: ${text}` : ""}`);
}

function runPlugin(
  path: string,
  command: string,
  type: string,
  env: Record<string, string>,
  stdin: string,
  timeoutMs: number,
): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(path, [], { env, stdio: ["pipe", "pipe", "pipe"] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.stdout.on("data", (c: Buffer) => out.push(c));
    child.stderr.on("data", (c: Buffer) => err.push(c));
    child.stdin.on("error", () => undefined); // a plugin exiting before reading stdin: its exit status tells why
    child.on("error", (e) => {
      clearTimeout(timer);
      reject(new CniError(type, command, 999, `cannot run ${path}: ${e.message}`, { cause: e }));
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      const stdout = Buffer.concat(out).toString();
      if (code === 0) return resolve(stdout);
      const exit = signal === "SIGKILL" ? `killed after ${timeoutMs} ms` : `exit ${code ?? signal}`;
      reject(pluginError(type, command, stdout, Buffer.concat(err).toString(), exit));
    });
    child.stdin.end(stdin);
  });
}
