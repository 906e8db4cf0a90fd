/**
 * RFC 6902 JSON patches, built with `test` preconditions so concurrent writers never lose each other's updates:
 * the server rejects the whole patch when a tested value changed, and the caller re-reads and retries.
 */

/** One JSON-patch operation. */
export type JsonPatchOp =
  | { op: "add" | "replace" | "test"; path: string; value: unknown }
  | { op: "remove"; path: string };

/** Escapes one path segment (`~` -> `~0`, `/` -> `~1`). */
export function pointerSegment(segment: string): string {
  return segment.replaceAll("~", "~0").replaceAll("/", "~1");
}

/** A JSON pointer from segments: `pointer("metadata", "labels", "kubevirt.io/x")`. */
export function pointer(...segments: (string | number)[]): string {
  return segments.map((s) => `/${pointerSegment(String(s))}`).join("");
}

/**
 * The patch that turns `oldValue` at `path` into `newValue`: a `test` of the old value (or of its absence via
 * `add`), then `replace`/`add`/`remove`. Returns `[]` when they are equal.
 */
export function patchField(path: string, oldValue: unknown, newValue: unknown): JsonPatchOp[] {
  if (deepEqual(oldValue, newValue)) return [];
  if (oldValue === undefined) return [{ op: "add", path, value: newValue }];
  if (newValue === undefined)
    return [
      { op: "test", path, value: oldValue },
      { op: "remove", path },
    ];
  return [
    { op: "test", path, value: oldValue },
    { op: "replace", path, value: newValue },
  ];
}

/** Structural equality of JSON values (key order ignored). */
export function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((v, i) => deepEqual(v, b[i]));
  const ak = Object.keys(a).filter((k) => (a as Record<string, unknown>)[k] !== undefined);
  const bk = Object.keys(b).filter((k) => (b as Record<string, unknown>)[k] !== undefined);
  if (ak.length !== bk.length) return false;
  return ak.every((k) => deepEqual((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k]));
}

/**
 * The patch that turns the object `oldObj` at `path` into `newObj`, member by member (each changed member gets a
 * `test` of its old value, so a concurrent writer of the *same* member makes the patch fail, while writers of other
 * members are not disturbed). `oldObj` undefined adds the whole object.
 */
export function diffMembers(
  path: string,
  oldObj: Readonly<Record<string, unknown>> | undefined,
  newObj: Readonly<Record<string, unknown>>,
): JsonPatchOp[] {
  if (oldObj === undefined) return [{ op: "add", path, value: newObj }];
  const keys = new Set([...Object.keys(oldObj), ...Object.keys(newObj)]);
  const ops: JsonPatchOp[] = [];
  for (const k of keys) ops.push(...patchField(`${path}/${pointerSegment(k)}`, oldObj[k], newObj[k]));
  return ops;
}
