/** Query-parameter and Accept-header parsing shared by the resource handlers. */
import { badRequest } from "../errors.ts";
import type { WriteContext } from "../rest/service.ts";
import type { IncludeObject } from "../table/table.ts";

/** True if the client asked for a meta.k8s.io Table. */
export function wantsTable(accept: string | undefined): boolean {
  if (!accept) return false;
  return accept.split(",").some((a) => /as=Table/.test(a) && /g=meta\.k8s\.io/.test(a));
}

/** includeObject (default Metadata). */
export function includeObject(q: URLSearchParams): IncludeObject {
  const v = q.get("includeObject");
  if (v === "None" || v === "Object" || v === "Metadata") return v;
  if (v) throw badRequest(`includeObject: unsupported value "${v}"`);
  return "Metadata";
}

/** A non-negative integer query parameter. */
export function intParam(q: URLSearchParams, name: string): number | undefined {
  const v = q.get(name);
  if (v === null || v === "") return undefined;
  if (!/^\d+$/.test(v)) throw badRequest(`invalid value for ${name}: ${v}`);
  return Number(v);
}

const MAX_UINT64 = 2n ** 64n - 1n;

/**
 * Parses a resourceVersion as kube-apiserver's storage does (strconv.ParseUint base 10): "" and "0" mean "any"
 * (undefined); anything else that is not an unsigned 64-bit decimal is 400 `invalid resource version: ...` with Go's
 * ParseUint message.
 */
export function parseResourceVersion(v: string | null): number | undefined {
  if (v === null || v === "" || v === "0") return undefined;
  if (!/^[0-9]+$/.test(v))
    throw badRequest(`invalid resource version: strconv.ParseUint: parsing ${JSON.stringify(v)}: invalid syntax`);
  if (BigInt(v) > MAX_UINT64)
    throw badRequest(`invalid resource version: strconv.ParseUint: parsing ${JSON.stringify(v)}: value out of range`);
  return Number(v);
}

/** The `resourceVersion` query parameter ("" / "0" = any); 400 for garbage. */
export function rvParam(q: URLSearchParams): number | undefined {
  return parseResourceVersion(q.get("resourceVersion"));
}

/** The write context of a request (`userAgent` names the field manager of a request without `fieldManager`). */
export function writeContext(q: URLSearchParams, user: WriteContext["user"], userAgent?: string): WriteContext {
  const fv = q.get("fieldValidation") ?? "Warn";
  if (fv !== "Strict" && fv !== "Warn" && fv !== "Ignore")
    throw badRequest(`fieldValidation must be one of "Ignore", "Warn", or "Strict", got "${fv}"`);
  const dryRun = q.getAll("dryRun");
  if (dryRun.some((d) => d !== "All")) throw badRequest(`Invalid dry run value: ${dryRun.join(",")}`);
  const options: Record<string, unknown> = {};
  const fm = q.get("fieldManager");
  if (fm) options.fieldManager = fm;
  // PatchOptions.force as apimachinery converts a query bool: "0", "f" and "false" (any case) are false, else true.
  const force = q.get("force");
  if (force !== null) options.force = !(force === "0" || /^(f|false)$/i.test(force));
  return { user, dryRun: dryRun.length > 0, fieldValidation: fv, warnings: [], options, freshBody: true, userAgent };
}
