/**
 * ClusterIP allocation for core/v1 Services, as kube-apiserver's service REST storage does it
 * (`--service-cluster-ip-range`, IPv4 single-stack):
 *
 *   create, type != ExternalName:  clusterIP unset or ""  -> a free address of the range (clusterIP + clusterIPs)
 *                                  "None"                 -> headless (clusterIPs ["None"], nothing allocated)
 *                                  an address             -> kept when inside the range and free, else 422
 *   update:                        clusterIP omitted      -> the stored one is carried over (kubectl apply/replace)
 *                                  clusterIP changed      -> 422 "may not change once set"
 *                                  ExternalName -> other  -> allocated as on create
 *
 * The addresses in use are the stored Services' plus those handed out and not yet committed (a create between
 * allocation and commit; such a reservation lapses after {@link RESERVATION_MS} when the create failed), so two
 * concurrent creates never get the same address. Like kube's dynamic
 * allocation, a random free address is taken from the upper part of the range first, leaving the lower band for
 * addresses users choose.
 */
import { randomInt } from "node:crypto";
import type { StatusCause } from "../errors.ts";
import { isObject, type KubeObject } from "../types.ts";
import type { Strategy } from "./types.ts";

/** kube-apiserver's default `--service-cluster-ip-range`. */
export const DEFAULT_SERVICE_CIDR = "10.96.0.0/12";

/** How long an address handed out on create stays reserved without a stored Service holding it. */
export const RESERVATION_MS = 60_000;

type ServiceSpec = Record<string, unknown> & {
  type?: unknown;
  clusterIP?: unknown;
  clusterIPs?: unknown;
};

/** An IPv4 range as numbers: first and last address (inclusive). */
interface Range {
  readonly cidr: string;
  readonly base: number;
  readonly size: number;
}

/** The 32-bit value of a dotted IPv4 address, or undefined when `ip` is not one. */
export function ipv4ToNumber(ip: string): number | undefined {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(ip);
  if (!m) return undefined;
  const parts = m.slice(1).map(Number);
  if (parts.some((p) => p > 255) || m.slice(1).some((p) => p.length > 1 && p.startsWith("0"))) return undefined;
  return ((parts[0] << 24) | (parts[1] << 16) | (parts[2] << 8) | parts[3]) >>> 0;
}

/** The dotted form of a 32-bit address. */
export function numberToIpv4(n: number): string {
  return [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join(".");
}

function parseRange(cidr: string): Range {
  const [ip, len] = cidr.split("/");
  const base = ipv4ToNumber(ip ?? "");
  const bits = Number(len);
  if (base === undefined || !Number.isInteger(bits) || bits < 8 || bits > 30)
    throw new TypeError(`service cluster IP range "${cidr}" must be an IPv4 CIDR of prefix length 8 to 30`);
  const size = 2 ** (32 - bits);
  if (base % size !== 0) throw new TypeError(`service cluster IP range "${cidr}" has host bits set`);
  return { cidr, base, size };
}

function specOf(o: KubeObject): ServiceSpec {
  if (!isObject(o.spec)) o.spec = {};
  return o.spec as ServiceSpec;
}

/** True for the Service types that carry a cluster IP (all but ExternalName). */
function needsClusterIp(spec: ServiceSpec | undefined): boolean {
  return (spec?.type ?? "ClusterIP") !== "ExternalName";
}

function firstClusterIp(spec: ServiceSpec | undefined): string {
  if (typeof spec?.clusterIP === "string" && spec.clusterIP !== "") return spec.clusterIP;
  const ips = spec?.clusterIPs;
  return Array.isArray(ips) && typeof ips[0] === "string" ? ips[0] : "";
}

const listValue = (spec: ServiceSpec, ip: string): string =>
  JSON.stringify(Array.isArray(spec.clusterIPs) ? spec.clusterIPs : [ip]);

/** Hands out the range's addresses; one per API server. */
export class ClusterIpAllocator {
  readonly #range: Range;
  readonly #stored: () => Iterable<KubeObject>;
  readonly #now: () => number;
  /** Address -> [uid of the Service it was handed to, when]. */
  readonly #reserved = new Map<number, { uid: string; at: number }>();

  /**
   * `cidr` is the service range; `storedServices` lists every stored Service (read at each allocation); `now` is
   * the clock in ms (tests pass their own).
   */
  constructor(cidr: string, storedServices: () => Iterable<KubeObject>, now: () => number = Date.now) {
    this.#range = parseRange(cidr);
    this.#stored = storedServices;
    this.#now = now;
  }

  /** The range, as given. */
  get cidr(): string {
    return this.#range.cidr;
  }

  /** The addresses in use by Services other than `uid` (stored, or reserved and not yet expired). */
  #used(uid: string): Set<number> {
    const used = new Set<number>();
    for (const svc of this.#stored()) {
      if (svc.metadata.uid === uid) continue;
      const n = ipv4ToNumber(firstClusterIp(svc.spec as ServiceSpec));
      if (n !== undefined) used.add(n);
    }
    const now = this.#now();
    for (const [n, r] of this.#reserved) {
      if (now - r.at > RESERVATION_MS) this.#reserved.delete(n);
      else if (r.uid !== uid) used.add(n);
    }
    return used;
  }

  /**
   * Drops the reservations of Service `uid`: call when a write of it was committed (its stored address counts from
   * then on) or it was deleted.
   */
  settled(uid: string): void {
    for (const [n, r] of this.#reserved) if (r.uid === uid) this.#reserved.delete(n);
  }

  /** A free address for the Service `uid`, reserved for it; undefined when the range is full. */
  allocate(uid: string): string | undefined {
    const { base, size } = this.#range;
    const used = this.#used(uid);
    // kube's bitmap allocator: dynamic addresses come from above a lower band kept for static choices.
    const band = Math.min(Math.max(16, Math.floor(size / 16)), 256);
    const usable = size - 2; // neither the network nor the broadcast address
    const lower = band < usable ? band : 1;
    const span = size - 1 - lower;
    const start = randomInt(0, Math.max(1, span));
    for (let i = 0; i < usable; i++) {
      // Offsets from `lower` to size-2 first (random start), then the lower band from 1.
      const k = i < span ? lower + ((start + i) % span) : 1 + (i - span);
      if (k < 1 || k > size - 2) continue;
      const n = (base + k) >>> 0;
      if (used.has(n)) continue;
      this.#reserved.set(n, { uid, at: this.#now() });
      return numberToIpv4(n);
    }
    return undefined;
  }

  /**
   * Checks that `ip` can be the Service `uid`'s and reserves it; returns kube's reason when not
   * ("the provided IP (...) is not in the valid range. ..." / "provided IP is already allocated").
   */
  claim(ip: string, uid: string): string | undefined {
    const n = ipv4ToNumber(ip);
    const { base, size } = this.#range;
    if (n === undefined || n <= base || n >= base + size - 1)
      return `the provided IP (${ip}) is not in the valid range. The range of valid IPs is ${this.#range.cidr}`;
    if (this.#used(uid).has(n)) return "provided IP is already allocated";
    this.#reserved.set(n, { uid, at: this.#now() });
    return undefined;
  }
}

function invalidIp(field: string, value: string, detail: string): StatusCause {
  return { reason: "FieldValueInvalid", field, message: `Invalid value: ${value}: ${detail}` };
}

/** Fills clusterIP/clusterIPs and the IP family fields of a Service that needs an address (create or type change). */
function assign(spec: ServiceSpec, uid: string, allocator: ClusterIpAllocator): void {
  const chosen = firstClusterIp(spec);
  if (chosen === "") {
    // Left empty when the range is full: validate() then reports it.
    const ip = allocator.allocate(uid);
    if (ip) {
      spec.clusterIP = ip;
      spec.clusterIPs = [ip];
    }
  } else {
    spec.clusterIP = chosen;
    if (!Array.isArray(spec.clusterIPs) || spec.clusterIPs.length === 0) spec.clusterIPs = [chosen];
  }
  spec.ipFamilies ??= ["IPv4"];
  spec.ipFamilyPolicy ??= "SingleStack";
}

/** kube-apiserver's defaults for a Service's ports and policies (pkg/apis/core/v1 SetDefaults_Service*). */
function defaultService(spec: ServiceSpec): void {
  spec.type ??= "ClusterIP";
  spec.sessionAffinity ??= "None";
  if (spec.type === "ExternalName") return;
  spec.internalTrafficPolicy ??= "Cluster";
  if (!Array.isArray(spec.ports)) return;
  for (const p of spec.ports) {
    if (!isObject(p)) continue;
    p.protocol ??= "TCP";
    if (p.targetPort === undefined || p.targetPort === 0 || p.targetPort === "") p.targetPort = p.port ?? 0;
  }
}

/** The Service strategy: defaults, ClusterIP allocation on create, immutability on update. */
export function serviceStrategy(allocator: ClusterIpAllocator): Strategy {
  const validateNew = (o: KubeObject): StatusCause[] => {
    const spec = specOf(o);
    const ip = firstClusterIp(spec);
    if (ip === "None") return [];
    if (ip === "")
      return [
        {
          reason: "FieldValueInvalid",
          field: "spec.clusterIPs",
          message: `Invalid value: []: failed to allocate a serviceIP: range is full`,
        },
      ];
    if (ipv4ToNumber(ip) === undefined)
      return [
        invalidIp(
          "spec.clusterIPs[0]",
          JSON.stringify(ip),
          "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
        ),
      ];
    const why = allocator.claim(ip, o.metadata.uid ?? "");
    return why ? [invalidIp("spec.clusterIPs", listValue(spec, ip), `failed to allocate IP ${ip}: ${why}`)] : [];
  };
  return {
    prepareCreate(o) {
      const spec = specOf(o);
      defaultService(spec);
      if (needsClusterIp(spec)) assign(spec, o.metadata.uid ?? "", allocator);
    },
    prepareUpdate(o, old) {
      const spec = specOf(o);
      const before = old.spec as ServiceSpec | undefined;
      defaultService(spec);
      if (!needsClusterIp(spec)) return;
      if (needsClusterIp(before)) {
        // kube's patchAllocatedValues: an update that leaves the address out keeps the stored one.
        if (spec.clusterIP === undefined || spec.clusterIP === "") spec.clusterIP = before?.clusterIP;
        if (!Array.isArray(spec.clusterIPs) || spec.clusterIPs.length === 0) spec.clusterIPs = before?.clusterIPs;
        spec.ipFamilies ??= before?.ipFamilies;
        spec.ipFamilyPolicy ??= before?.ipFamilyPolicy;
      } else assign(spec, o.metadata.uid ?? "", allocator);
    },
    validate(o, old) {
      const spec = specOf(o);
      if (!needsClusterIp(spec)) return [];
      const before = old?.spec as ServiceSpec | undefined;
      if (!old || !needsClusterIp(before)) return validateNew(o);
      const was = firstClusterIp(before);
      const now = firstClusterIp(spec);
      if (was !== now) return [invalidIp("spec.clusterIPs[0]", listValue(spec, now), "may not change once set")];
      return [];
    },
  };
}
