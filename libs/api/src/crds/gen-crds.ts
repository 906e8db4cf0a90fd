/**
 * Writes libs/api/crds/*.yaml from the schemas (the only file of this package that does I/O).
 * Run: `npm run gen:crds -w @kvt/api` (or `node libs/api/src/crds/gen-crds.ts`).
 */
import { mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { renderCrdFiles } from "./render.ts";

const dir = fileURLToPath(new URL("../../crds/", import.meta.url));
mkdirSync(dir, { recursive: true });
const files = renderCrdFiles();
for (const name of readdirSync(dir)) {
  if (name.endsWith(".yaml") && !files.has(name)) rmSync(join(dir, name));
}
for (const [name, content] of files) writeFileSync(join(dir, name), content);
console.log(`wrote ${files.size} files to ${dir}`);
