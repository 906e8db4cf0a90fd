/**
 * The limits kube-apiserver puts on a request body, shared by the components that decode one (the local API server,
 * virt-api's webhooks and subresources): its size, and how deeply its JSON may nest. kube-apiserver's own JSON decoder
 * stops at 10000 levels; V8's recursive builtins (JSON.stringify, structuredClone) and recursive walks over objects
 * (schemas, patches, admitters) overflow the stack well before that (structuredClone at about 2000 levels), so a body
 * deeper than {@link MAX_JSON_DEPTH} is refused with a 400 before anything recursive touches it.
 */

/** kube-apiserver's request body limit (3 MiB): larger bodies get 413 RequestEntityTooLarge. */
export const MAX_REQUEST_BODY_BYTES = 3 * 1024 * 1024;

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
