/**
 * A Pod's resource quantities as kube-apiserver treats them:
 * - decoding (`resource.Quantity` UnmarshalJSON): a value that does not parse fails the whole request with 400
 *   `Pod in version "v1" cannot be handled as a Pod: <apimachinery's message>`; one that parses is stored in its
 *   canonical form ("1024Mi" -> "1Gi", "99999999999999999999Ei" -> the int64 cap "9223372036854775807");
 * - validation (pkg/apis/core/validation ValidateContainerResourceRequirements, ValidateResourceQuantityValue):
 *   no quantity below 0, whole numbers for integer (extended) resources, requests <= limits, and requests equal to
 *   limits for resources that cannot be overcommitted (extended resources, hugepages).
 * Kubernetes sets no upper bound: `1e400` of memory is a valid (unschedulable) request, as on a real cluster.
 */
import { Quantity, QuantityError, tryParseQuantity } from "@kvt/api";
import { type ApiError, badRequest, type StatusCause } from "../errors.ts";
import { isObject, type KubeObject } from "../types.ts";

type O = Record<string, unknown>;
const CONTAINER_LISTS = ["initContainers", "containers", "ephemeralContainers"] as const;

/** The quantity maps of a pod spec, with their field paths. */
function quantityMaps(spec: O): { path: string; map: O; limits?: O }[] {
  const out: { path: string; map: O; limits?: O }[] = [];
  for (const list of CONTAINER_LISTS) {
    const containers = spec[list];
    if (!Array.isArray(containers)) continue;
    containers.forEach((c, i) => {
      const resources = isObject(c) && isObject(c.resources) ? c.resources : undefined;
      if (!resources) return;
      const limits = isObject(resources.limits) ? resources.limits : undefined;
      const base = `spec.${list}[${i}].resources`;
      if (limits) out.push({ path: `${base}.limits`, map: limits });
      if (isObject(resources.requests)) out.push({ path: `${base}.requests`, map: resources.requests, limits });
    });
  }
  if (isObject(spec.overhead)) out.push({ path: "spec.overhead", map: spec.overhead });
  return out;
}

const jsonType = (v: unknown): string =>
  Array.isArray(v) ? "array" : typeof v === "boolean" ? "bool" : typeof v === "object" ? "object" : typeof v;

/** The 400 of encoding/json for `v` at the Go struct field `struct.path` of type `type`. */
function cannotUnmarshal(v: unknown, struct: string, path: string, type: string): ApiError {
  return badRequest(
    `Pod in version "v1" cannot be handled as a Pod: json: cannot unmarshal ${jsonType(v)} into Go struct field ${struct}.${path} of type ${type}`,
  );
}

/**
 * The container lists and their resources must have the Go types (the pod schema is permissive below spec); found
 * by the API fuzz lane: a pod whose limits were an array of maps was stored.
 */
function checkContainerTypes(spec: O): void {
  const present = (v: unknown): boolean => v !== undefined && v !== null;
  for (const list of CONTAINER_LISTS) {
    const containers = spec[list];
    const item = list === "ephemeralContainers" ? "v1.EphemeralContainer" : "v1.Container";
    if (!present(containers)) continue;
    if (!Array.isArray(containers)) throw cannotUnmarshal(containers, "PodSpec", `spec.${list}`, `[]${item}`);
    for (const c of containers) {
      if (!isObject(c)) throw cannotUnmarshal(c, "PodSpec", `spec.${list}`, item);
      const struct = list === "ephemeralContainers" ? "EphemeralContainerCommon" : "Container";
      if (!present(c.resources)) continue;
      if (!isObject(c.resources))
        throw cannotUnmarshal(c.resources, struct, `spec.${list}.resources`, "v1.ResourceRequirements");
      for (const key of ["limits", "requests"] as const) {
        const m = c.resources[key];
        if (present(m) && !isObject(m))
          throw cannotUnmarshal(m, "ResourceRequirements", `spec.${list}.resources.${key}`, "v1.ResourceList");
      }
    }
  }
  if (present(spec.overhead) && !isObject(spec.overhead))
    throw cannotUnmarshal(spec.overhead, "PodSpec", "spec.overhead", "v1.ResourceList");
}

/** Parses every quantity of `pod` and rewrites it canonically; throws 400 as kube's decoder does. */
export function decodePodQuantities(pod: KubeObject): void {
  if (!isObject(pod.spec)) return;
  checkContainerTypes(pod.spec);
  for (const { map } of quantityMaps(pod.spec)) {
    for (const [name, raw] of Object.entries(map)) map[name] = raw === null ? "0" : canonicalQuantity(raw, "Pod");
  }
}

/**
 * `raw` in its canonical form, or the 400 `<kind> in version "v1" cannot be handled as a <kind>: <message>`. A
 * non-string non-number goes through the same parser in Go (its raw JSON text) and fails the same way.
 */
function canonicalQuantity(raw: unknown, kind: "Pod" | "Node"): string {
  try {
    return Quantity.parse(typeof raw === "number" || typeof raw === "string" ? raw : JSON.stringify(raw)).toString();
  } catch (err) {
    if (!(err instanceof QuantityError)) throw err;
    throw badRequest(`${kind} in version "v1" cannot be handled as a ${kind}: ${err.message}`);
  }
}

/**
 * A Node's `status.capacity` and `status.allocatable` in their canonical form, as kube-apiserver stores what a
 * kubelet reports (`devices.kubevirt.io/kvm: "1000"` reads back as "1k"); a value that is not a quantity is the 400
 * `Node in version "v1" cannot be handled as a Node: <apimachinery's message>`.
 */
export function decodeNodeQuantities(node: KubeObject): void {
  const status = isObject(node.status) ? node.status : undefined;
  for (const key of ["capacity", "allocatable"] as const) {
    const map = status && isObject(status[key]) ? status[key] : undefined;
    if (!map) continue;
    for (const [name, raw] of Object.entries(map)) if (raw !== null) map[name] = canonicalQuantity(raw, "Node");
  }
}

const invalid = (field: string, value: string, detail: string): StatusCause => ({
  reason: "FieldValueInvalid",
  field,
  message: `Invalid value: ${JSON.stringify(value)}: ${detail}`,
});

/** kube's helper.IsIntegerResourceName for container resources: extended (domain-qualified, non-native) names. */
function isExtended(name: string): boolean {
  return name.includes("/") && !name.includes("kubernetes.io/") && !name.startsWith("requests.");
}
const isHugePages = (name: string): boolean => name.startsWith("hugepages-");
const overcommitAllowed = (name: string): boolean => !isExtended(name) && !isHugePages(name);

/** Validates the (already decoded, canonical) quantities of `pod`; kube-apiserver's fields and messages. */
export function validatePodQuantities(pod: KubeObject): StatusCause[] {
  if (!isObject(pod.spec)) return [];
  const causes: StatusCause[] = [];
  for (const { path, map, limits } of quantityMaps(pod.spec)) {
    for (const [name, raw] of Object.entries(map)) {
      // Decoded already; a value stored before decoding existed (or set by a webhook) and not parsing is skipped.
      const q = tryParseQuantity(raw);
      if (!q) continue;
      const field = `${path}[${name}]`;
      if (q.cmp(Quantity.of(0)) < 0) causes.push(invalid(field, q.toString(), "must be greater than or equal to 0"));
      if (isExtended(name) && q.milliValue() % 1000n !== 0n)
        causes.push(invalid(field, q.toString(), "must be an integer"));
      const limit = tryParseQuantity(limits?.[name]);
      if (!limit) continue;
      if (!overcommitAllowed(name) && q.cmp(limit) !== 0)
        causes.push(invalid(path, q.toString(), `must be equal to ${name} limit of ${limit.toString()}`));
      else if (q.cmp(limit) > 0)
        causes.push(invalid(path, q.toString(), `must be less than or equal to ${name} limit of ${limit.toString()}`));
    }
  }
  return causes;
}
