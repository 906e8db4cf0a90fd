/**
 * ESLint rule `kvt/module-boundaries`: an import that breaks the dependency direction between projects is a lint
 * error. Checks static imports, re-exports, dynamic `import()`, `require()` and calls of a `createRequire(...)`
 * result, direct or through a name it was bound to (docs/decisions/0016: why this rule and not Nx's).
 *
 * Errors:
 *  - a relative import that reaches into another project (import it by package name instead);
 *  - a deep import (`@kvt/api/src/x`): projects export only from their barrel (and subpaths their package.json
 *    `exports` declares, such as an app's `./lib`);
 *  - an edge the tags forbid (see dep-constraints.ts).
 */
import { dirname, resolve } from "node:path";
import type { Rule } from "eslint";
import { violation } from "./dep-constraints.ts";
import {
  projectOfFile,
  projectOfPackageSpecifier,
  readWorkspaceProjects,
  type WorkspaceProject,
} from "./workspace-projects.ts";

const cache = new Map<string, WorkspaceProject[]>();

function projectsOf(workspaceRoot: string): WorkspaceProject[] {
  let projects = cache.get(workspaceRoot);
  if (!projects) {
    projects = readWorkspaceProjects(workspaceRoot);
    cache.set(workspaceRoot, projects);
  }
  return projects;
}

/** Options: `{ workspaceRoot: string }` (absolute). */
export const moduleBoundariesRule: Rule.RuleModule = {
  meta: {
    type: "problem",
    docs: { description: "Enforce the dependency direction between workspace projects (Nx tags)." },
    schema: [{ type: "object", properties: { workspaceRoot: { type: "string" } }, additionalProperties: false }],
    messages: {
      crossRelative: 'Import "{{spec}}" reaches into project "{{target}}" by path; import "{{pkg}}" instead.',
      deep: 'Deep import "{{spec}}": "{{target}}" exports only from its barrel; import "{{pkg}}".',
      forbidden: 'Project "{{source}}" must not import "{{target}}": {{why}}.',
    },
  },
  create(context) {
    const options = (context.options[0] ?? {}) as { workspaceRoot?: string };
    const workspaceRoot = options.workspaceRoot ?? context.cwd;
    const projects = projectsOf(workspaceRoot);
    const file = context.filename;
    const source = projectOfFile(projects, file);
    if (!source) return {};
    // Benches are measuring harnesses like tests: they may use the test support and the local cluster.
    const isTestFile = /\.(test|spec|e2e\.test|bench)\.ts$/.test(file) || /\/fake\//.test(file);

    function check(node: Rule.Node, spec: unknown): void {
      if (typeof spec !== "string" || !source) return;
      let target: WorkspaceProject | undefined;
      if (spec.startsWith(".")) {
        target = projectOfFile(projects, resolve(dirname(file), spec));
        if (target && target !== source) {
          context.report({
            node,
            messageId: "crossRelative",
            data: { spec, target: target.name, pkg: target.packageName },
          });
          return;
        }
      } else {
        const hit = projectOfPackageSpecifier(projects, spec);
        if (!hit || hit.project === source) return;
        target = hit.project;
        if (hit.subpath && !hit.subpath.endsWith(".json") && !target.exportedSubpaths.includes(hit.subpath)) {
          context.report({ node, messageId: "deep", data: { spec, target: target.name, pkg: target.packageName } });
          return;
        }
      }
      if (!target || target === source) return;
      const why = violation(source.tags, target.tags, isTestFile);
      if (why)
        context.report({ node, messageId: "forbidden", data: { source: source.name, target: target.name, why } });
    }

    /** Names bound to a `createRequire(...)` result in this file (`const requireHere = createRequire(import.meta.url)`). */
    const requireFunctions = new Set<string>(["require"]);
    const isCreateRequire = (node: { type: string; callee?: unknown }): boolean =>
      node.type === "CallExpression" &&
      (node.callee as { type: string; name?: string }).type === "Identifier" &&
      (node.callee as { name?: string }).name === "createRequire";

    return {
      VariableDeclarator: (node) => {
        if (node.id.type === "Identifier" && node.init && isCreateRequire(node.init))
          requireFunctions.add(node.id.name);
      },
      ImportDeclaration: (node) => check(node, node.source.value),
      ExportNamedDeclaration: (node) => node.source && check(node, node.source.value),
      ExportAllDeclaration: (node) => check(node, node.source.value),
      ImportExpression: (node) => node.source.type === "Literal" && check(node, node.source.value),
      CallExpression: (node) => {
        const arg = node.arguments[0];
        const callee = node.callee;
        const isRequire =
          (callee.type === "Identifier" && requireFunctions.has(callee.name)) || isCreateRequire(callee);
        if (isRequire && arg?.type === "Literal") check(node, arg.value);
      },
    };
  },
};

/** The ESLint plugin object: `plugins: { kvt: plugin }`, rule `kvt/module-boundaries`. */
export const plugin = { rules: { "module-boundaries": moduleBoundariesRule } };
