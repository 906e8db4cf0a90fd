/**
 * The figures of the controller benches (controller.bench.ts, scale.bench.ts), as pure functions: what a scrape of
 * virt-controller's /metrics and /proc say, and the scale bench's flags.
 */
import { parseArgs } from "node:util";

/** Rounds to two decimals (the benches' figures). */
export const round2 = (x: number): number => Math.round(x * 100) / 100;

/**
 * API requests per VMI by `VERB resource` from a scrape of `kubevirt_rest_client_requests_total` (watches and lists
 * left out: they do not grow with the VMs), sorted; entries under 0.005 per VMI dropped.
 */
export function requestsPerVmi(metrics: string, vmis: number): Record<string, number> {
  const requests: Record<string, number> = {};
  for (const m of metrics.matchAll(/^kubevirt_rest_client_requests_total\{([^}]*)\} (\d+(?:\.\d+)?(?:e\+?\d+)?)/gm)) {
    const labels = Object.fromEntries([...m[1].matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    if (labels.verb === "WATCH" || labels.verb === "LIST") continue;
    const k = `${labels.verb} ${labels.resource}`;
    requests[k] = (requests[k] ?? 0) + Number(m[2]);
  }
  return Object.fromEntries(
    Object.entries(requests)
      .filter(([, v]) => v / vmis >= 0.005)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([k, v]) => [k, round2(v / vmis)]),
  );
}

/** The sum of every `kubevirt_rest_client_requests_total` series (has the controller settled?). */
export function totalRequests(metrics: string): number {
  return [...metrics.matchAll(/^kubevirt_rest_client_requests_total\{[^}]*\} (\d+(?:\.\d+)?(?:e\+?\d+)?)/gm)].reduce(
    (a, m) => a + Number(m[1]),
    0,
  );
}

/** Requests that failed, by `VERB resource code` (4xx and 5xx answers), for the bench's diagnostics. */
export function failedRequests(metrics: string): Record<string, number> {
  const failed: Record<string, number> = {};
  for (const m of metrics.matchAll(/^kubevirt_rest_client_requests_total\{([^}]*)\} (\d+(?:\.\d+)?)/gm)) {
    const labels = Object.fromEntries([...m[1].matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    if (!/^[45]/.test(labels.code ?? "")) continue;
    const k = `${labels.verb} ${labels.resource} ${labels.code}`;
    failed[k] = (failed[k] ?? 0) + Number(m[2]);
  }
  return failed;
}

/** User + system CPU seconds of a process from its /proc/<pid>/stat text (fields 14 and 15, in 1/100 s ticks). */
export function cpuSecondsFromStat(stat: string): number {
  // The command name (field 2) is in parentheses and may hold spaces or parentheses: count from the last ")".
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const user = Number(fields[11]);
  const system = Number(fields[12]);
  if (!Number.isFinite(user) || !Number.isFinite(system)) throw new Error(`not a /proc/<pid>/stat line: ${stat}`);
  return (user + system) / 100; // USER_HZ is 100 on Linux
}

/** A `Vm*: N kB` line of /proc/<pid>/status in bytes (VmRSS, VmHWM), or 0 when absent. */
export function statusBytes(status: string, field: "VmRSS" | "VmHWM"): number {
  return Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? 0) * 1024;
}

/** The API servers the scale bench can run on, in the order it runs them (the last one prints the last line). */
export const SCALE_SERVERS = ["embedded", "kube-apiserver"] as const;
export type ScaleServer = (typeof SCALE_SERVERS)[number];

/** The scale bench's flags. */
export interface ScaleArgs {
  readonly vms: number;
  readonly nodes: number;
  readonly servers: readonly ScaleServer[];
}

/** Parses `[--vms N] [--nodes M] [--servers embedded,kube-apiserver]`; throws a TypeError naming a bad flag. */
export function parseScaleArgs(argv: readonly string[]): ScaleArgs {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      vms: { type: "string", default: "10000" },
      nodes: { type: "string", default: "100" },
      servers: { type: "string", default: SCALE_SERVERS.join(",") },
    },
  });
  const count = (flag: string, text: string): number => {
    const n = Number(text);
    if (!/^\d+$/.test(text) || !Number.isSafeInteger(n) || n < 1) {
      throw new TypeError(`--${flag} must be a positive integer: ${JSON.stringify(text)}`);
    }
    return n;
  };
  const asked = values.servers.split(",").filter(Boolean);
  const unknown = asked.filter((s) => !(SCALE_SERVERS as readonly string[]).includes(s));
  if (asked.length === 0 || unknown.length > 0) {
    throw new TypeError(`--servers takes ${SCALE_SERVERS.join(" and/or ")}, comma-separated: ${values.servers}`);
  }
  return {
    vms: count("vms", values.vms),
    nodes: count("nodes", values.nodes),
    servers: SCALE_SERVERS.filter((s) => asked.includes(s)),
  };
}
