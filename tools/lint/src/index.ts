/** Workspace lint rules and the project/tag model they share. */

/** The dependency constraints and the pure check behind the rule. */
export { DEP_CONSTRAINTS, type DepConstraint, TEST_ONLY_TAGS, violation } from "./dep-constraints.ts";
/** The ESLint plugin with the `module-boundaries` rule. */
export { moduleBoundariesRule, plugin } from "./module-boundaries-rule.ts";
/** Reading the workspace's projects and tags. */
export { projectOfFile, readWorkspaceProjects, type WorkspaceProject } from "./workspace-projects.ts";
