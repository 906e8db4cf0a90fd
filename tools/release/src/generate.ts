/**
 * Writes deploy/ from the code (the only file of this package that writes): every file renderDeploy() returns, and
 * removes YAML and Markdown files under deploy/ that it no longer makes. Run: `npm run gen -w @kvt/release`.
 */
import { mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { DEPLOY_DIR } from "./index.ts";
import { renderDeploy } from "./render.ts";

function generatedFiles(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && (e.name.endsWith(".yaml") || e.name.endsWith(".md")))
    .map((e) => relative(DEPLOY_DIR, join(e.parentPath, e.name)));
}

const files = renderDeploy();
mkdirSync(DEPLOY_DIR, { recursive: true });
for (const stale of generatedFiles(DEPLOY_DIR).filter((f) => !files.has(f))) rmSync(join(DEPLOY_DIR, stale));
for (const [path, content] of files) {
  mkdirSync(dirname(join(DEPLOY_DIR, path)), { recursive: true });
  writeFileSync(join(DEPLOY_DIR, path), content);
}
process.stdout.write(`wrote ${files.size} files to ${DEPLOY_DIR}\n`);
