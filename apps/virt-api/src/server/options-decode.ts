/**
 * The typed decoding of a subresource body (StartOptions, StopOptions, RestartOptions, MigrateOptions, PauseOptions,
 * UnpauseOptions) that KubeVirt gets from encoding/json: a field of the wrong JSON type is a 400 with Go's message,
 * and dryRun takes only "All", as the API server the options are passed on to. Found by the API fuzz lane: a
 * `{"gracePeriod":"x"}` stop reached the VMI patch and answered 500.
 */

type FieldType = "int64" | "bool" | "[]string" | "map[string]string";

const STRUCTS: Readonly<Record<string, { struct: string; fields: Readonly<Record<string, FieldType>> }>> = {
  start: { struct: "StartOptions", fields: { paused: "bool", dryRun: "[]string" } },
  stop: { struct: "StopOptions", fields: { gracePeriod: "int64", dryRun: "[]string" } },
  restart: { struct: "RestartOptions", fields: { gracePeriodSeconds: "int64", dryRun: "[]string" } },
  migrate: { struct: "MigrateOptions", fields: { addedNodeSelector: "map[string]string", dryRun: "[]string" } },
  pause: { struct: "PauseOptions", fields: { dryRun: "[]string" } },
  unpause: { struct: "UnpauseOptions", fields: { dryRun: "[]string" } },
};

const MAX_INT64 = 2 ** 63;

/** encoding/json's name for the JSON value `v` in an UnmarshalTypeError ("number 1.5" for numbers). */
function jsonValue(v: unknown): string {
  if (Array.isArray(v)) return "array";
  if (typeof v === "boolean") return "bool";
  if (typeof v === "number") return `number ${String(v)}`;
  return typeof v === "object" ? "object" : typeof v;
}

function fits(type: FieldType, v: unknown): { ok: true } | { ok: false; value: unknown; type: string } {
  const bad = (value: unknown, t: string = type) => ({ ok: false as const, value, type: t });
  switch (type) {
    case "int64":
      return typeof v === "number" && Number.isInteger(v) && v >= -MAX_INT64 && v < MAX_INT64 ? { ok: true } : bad(v);
    case "bool":
      return typeof v === "boolean" ? { ok: true } : bad(v);
    case "[]string": {
      if (!Array.isArray(v)) return bad(v);
      const item: unknown = (v as unknown[]).find((x) => typeof x !== "string");
      return item === undefined ? { ok: true } : bad(item, "string");
    }
    case "map[string]string": {
      if (typeof v !== "object" || Array.isArray(v)) return bad(v);
      const item: unknown = Object.values(v as object).find((x) => typeof x !== "string");
      return item === undefined ? { ok: true } : bad(item, "string");
    }
  }
}

/** The 400 message for `body` as the options of `action`, or undefined when it decodes. */
export function optionsProblem(action: string, body: Readonly<Record<string, unknown>>): string | undefined {
  const spec = STRUCTS[action];
  if (!spec) return undefined;
  for (const [field, type] of Object.entries(spec.fields)) {
    const v = body[field];
    if (v === undefined || v === null) continue;
    const r = fits(type, v);
    if (!r.ok) {
      // Go names the literal only for a number that does not fit a numeric field ("number 1.5").
      const value =
        r.type === "int64" && typeof r.value === "number" ? jsonValue(r.value) : jsonValue(r.value).split(" ")[0];
      return `Can not unmarshal Request body to struct, error: json: cannot unmarshal ${value} into Go struct field ${spec.struct}.${field} of type ${r.type}`;
    }
  }
  const dryRun = body.dryRun as string[] | undefined | null;
  const unsupported = (dryRun ?? []).find((d) => d !== "All");
  if (unsupported !== undefined) return `Invalid dryRun value "${unsupported}": supported values: "All"`;
  return undefined;
}
