/**
 * Nesting depth of decoded request bodies. kube-apiserver's JSON decoder stops at 10000 levels; V8's recursive
 * builtins (JSON.stringify, structuredClone) and this server's own recursive walks (schema, patches) overflow the
 * stack well before that (structuredClone at about 2000 levels), so bodies deeper than {@link MAX_JSON_DEPTH} are
 * refused with a 400 before anything recursive touches them. The check itself is iterative.
 */

/** The deepest nesting of arrays and objects a request body may have (1 = a flat object). */
export const MAX_JSON_DEPTH = 1000;

/** True if `value` nests arrays/objects more than `max` levels deep. Iterative: safe on any depth. */
export function exceedsDepth(value: unknown, max: number = MAX_JSON_DEPTH): boolean {
  if (value === null || typeof value !== "object") return false;
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length > 0) {
    const [v, depth] = stack.pop() as [unknown, number];
    if (depth > max) return true;
    const children = Array.isArray(v) ? v : Object.values(v as Record<string, unknown>);
    for (const c of children) if (c !== null && typeof c === "object") stack.push([c, depth + 1]);
  }
  return false;
}
