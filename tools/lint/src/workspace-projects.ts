/**
 * Reads the workspace's projects (every package.json under apps/, libs/, tools/, native/ and e2e/) with their
 * Nx names and tags. Pure file reads; used by the module-boundaries rule and the dependency check.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join, relative, sep } from "node:path";

/** One workspace project as the boundary rules see it. */
export interface WorkspaceProject {
  /** Nx project name (package.json `nx.name`, else the package name). */
  readonly name: string;
  /** npm package name, the only way other projects may import it. */
  readonly packageName: string;
  /** Absolute directory of the project. */
  readonly root: string;
  /** Nx tags, e.g. `type:app`, `scope:node`. */
  readonly tags: readonly string[];
  /** Workspace packages named in dependencies/devDependencies. */
  readonly dependsOn: readonly string[];
  /** Public subpaths declared in package.json `exports` besides ".", without "./" (e.g. "lib"). */
  readonly exportedSubpaths: readonly string[];
}

interface PackageJson {
  name?: string;
  exports?: string | Record<string, unknown>;
  nx?: { name?: string; tags?: string[] };
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
}

const PROJECT_PARENTS = ["apps", "libs", "tools"];
const PROJECT_DIRS = ["native", "e2e"];

/** Lists the projects of the workspace rooted at `workspaceRoot`. */
export function readWorkspaceProjects(workspaceRoot: string): WorkspaceProject[] {
  const dirs: string[] = [];
  for (const parent of PROJECT_PARENTS) {
    const abs = join(workspaceRoot, parent);
    if (!existsSync(abs)) continue;
    for (const entry of readdirSync(abs, { withFileTypes: true })) {
      if (entry.isDirectory()) dirs.push(join(abs, entry.name));
    }
  }
  for (const dir of PROJECT_DIRS) dirs.push(join(workspaceRoot, dir));
  const projects: WorkspaceProject[] = [];
  for (const root of dirs) {
    const file = join(root, "package.json");
    if (!existsSync(file)) continue;
    const pkg = JSON.parse(readFileSync(file, "utf8")) as PackageJson;
    if (!pkg.name) continue;
    const deps = Object.keys({ ...pkg.dependencies, ...pkg.devDependencies });
    projects.push({
      name: pkg.nx?.name ?? pkg.name,
      packageName: pkg.name,
      root,
      tags: pkg.nx?.tags ?? [],
      dependsOn: deps,
      exportedSubpaths:
        pkg.exports && typeof pkg.exports === "object"
          ? Object.keys(pkg.exports)
              .filter((k) => k.startsWith("./"))
              .map((k) => k.slice(2))
          : [],
    });
  }
  return projects;
}

/** The project whose directory contains `file`, or undefined when the file is outside every project. */
export function projectOfFile(projects: readonly WorkspaceProject[], file: string): WorkspaceProject | undefined {
  let best: WorkspaceProject | undefined;
  for (const p of projects) {
    const rel = relative(p.root, file);
    if (rel.startsWith("..") || rel.startsWith(sep)) continue;
    if (!best || p.root.length > best.root.length) best = p;
  }
  return best;
}

/** The project an import specifier names by package (`@kvt/api` or `@kvt/api/x`), if any. */
export function projectOfPackageSpecifier(
  projects: readonly WorkspaceProject[],
  specifier: string,
): { project: WorkspaceProject; subpath: string } | undefined {
  for (const p of projects) {
    if (specifier === p.packageName) return { project: p, subpath: "" };
    if (specifier.startsWith(`${p.packageName}/`)) {
      return { project: p, subpath: specifier.slice(p.packageName.length + 1) };
    }
  }
  return undefined;
}
