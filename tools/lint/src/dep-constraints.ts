/**
 * Nx-style dependency constraints between tagged projects (STYLE.md §2), as pure functions.
 *
 *   apps/*  ->  domain libs, vmm  ->  core libs (kube, observability)  ->  api
 *                             vmm  ->  native          (nothing else touches native)
 *   testing -> anything, but only tests and e2e may import it
 */

/** One rule, as in Nx's `@nx/enforce-module-boundaries` depConstraints. */
export interface DepConstraint {
  readonly sourceTag: string;
  readonly onlyDependOnLibsWithTags?: readonly string[];
  readonly notDependOnLibsWithTags?: readonly string[];
}

/** The project's dependency direction. Tools and e2e may use anything. */
export const DEP_CONSTRAINTS: readonly DepConstraint[] = [
  { sourceTag: "type:api", onlyDependOnLibsWithTags: [] },
  { sourceTag: "type:core", onlyDependOnLibsWithTags: ["type:api", "type:core"] },
  { sourceTag: "type:native", onlyDependOnLibsWithTags: [] },
  { sourceTag: "type:vmm", onlyDependOnLibsWithTags: ["type:api", "type:core", "type:native"] },
  { sourceTag: "type:domain", onlyDependOnLibsWithTags: ["type:api", "type:core", "type:domain", "type:vmm"] },
  { sourceTag: "type:app", onlyDependOnLibsWithTags: ["type:api", "type:core", "type:domain", "type:vmm"] },
  { sourceTag: "scope:control-plane", notDependOnLibsWithTags: ["scope:node", "type:native"] },
];

/** Tags that only test files (`*.test.ts`) and e2e may depend on. */
export const TEST_ONLY_TAGS: readonly string[] = ["type:testing"];

/** Tags that test files may depend on besides the normal rules: fakes, and tools such as the local API server. */
export const TEST_EXTRA_TAGS: readonly string[] = ["type:testing", "type:tool"];

/**
 * Explains why a project tagged `sourceTags` may not depend on one tagged `targetTags`, or returns undefined
 * when the edge is allowed. `isTestFile` lifts the test-only restriction.
 */
export function violation(
  sourceTags: readonly string[],
  targetTags: readonly string[],
  isTestFile: boolean,
  constraints: readonly DepConstraint[] = DEP_CONSTRAINTS,
): string | undefined {
  const testOnly = targetTags.find((t) => TEST_ONLY_TAGS.includes(t));
  if (testOnly) {
    const allowed = isTestFile || sourceTags.includes("type:e2e") || sourceTags.includes("type:tool");
    if (!allowed && !sourceTags.includes("type:testing")) {
      return `a project tagged "${testOnly}" may only be imported from *.test.ts and *.bench.ts files and e2e`;
    }
    return undefined;
  }
  if (isTestFile && targetTags.some((t) => TEST_EXTRA_TAGS.includes(t))) return undefined;
  for (const c of constraints) {
    if (!sourceTags.includes(c.sourceTag)) continue;
    if (c.onlyDependOnLibsWithTags && !targetTags.some((t) => c.onlyDependOnLibsWithTags?.includes(t))) {
      const allowed = c.onlyDependOnLibsWithTags.length ? c.onlyDependOnLibsWithTags.join(", ") : "nothing";
      return `a project tagged "${c.sourceTag}" can only depend on projects tagged ${allowed}`;
    }
    const banned = targetTags.find((t) => c.notDependOnLibsWithTags?.includes(t));
    if (banned) return `a project tagged "${c.sourceTag}" must not depend on projects tagged "${banned}"`;
  }
  return undefined;
}
