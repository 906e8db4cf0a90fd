/**
 * Builds the installable virtctl: one npm package, with no dependencies, that installs the `virtctl` command, the
 * `kubectl-virt` kubectl plugin and `kubectl_complete-virt`, its shell completion for kubectl (all the same file). The sources and every package they import are bundled with
 * rolldown (the bundler the local cluster's launcher image already uses) into ES modules for the Node on the user's
 * machine, so nothing from this repository or its node_modules is needed at run time.
 *
 * ```
 * npm run package -w @kvt/virtctl          # -> apps/virtctl/build/kvt-virtctl-<version>.tgz
 * npm install -g apps/virtctl/build/kvt-virtctl-<version>.tgz
 * ```
 *
 * Layout of the package (`build/package/`): `bin/virtctl.mjs` (the entry, with a `#!/usr/bin/env node` line),
 * `bin/chunks/*.mjs` (code loaded only when needed: the exec/auth-provider credential plugins through
 * @kubernetes/client-node, OTLP tracing), `package.json`, `README.md`.
 */
import { execFileSync } from "node:child_process";
import { chmodSync, copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** The oldest Node the bundle is built for and the package's `engines` range (Node 20 has everything it uses). */
export const MIN_NODE_MAJOR = 20;

/** Where the virtctl project lives (the folder with its package.json). */
export const PROJECT_DIR = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

/** What {@link buildPackage} produced. */
export interface BuiltPackage {
  /** The unpacked package folder. */
  readonly dir: string;
  /** The `npm pack` tarball (what `npm install -g` takes). */
  readonly tarball: string;
}

interface ProjectManifest {
  readonly version: string;
  readonly description: string;
}

/** Optional native speed-ups `ws` tries to `require` inside a try/catch: left out, ws falls back to plain JS. */
const OPTIONAL_NATIVE = ["bufferutil", "utf-8-validate"];

async function bundle(outDir: string): Promise<void> {
  const { rolldown } = await import("rolldown");
  const build = await rolldown({
    input: join(PROJECT_DIR, "src/main.ts"),
    platform: "node",
    external: OPTIONAL_NATIVE,
    transform: { target: `node${MIN_NODE_MAJOR}` },
    logLevel: "silent",
  });
  try {
    await build.write({
      dir: join(outDir, "bin"),
      format: "esm",
      entryFileNames: "virtctl.mjs",
      chunkFileNames: "chunks/[name]-[hash].mjs",
      minify: true,
    });
  } finally {
    await build.close();
  }
}

function writeManifest(outDir: string, project: ProjectManifest): void {
  const manifest = {
    name: "@kvt/virtctl",
    version: project.version,
    description: project.description,
    type: "module",
    license: "Apache-2.0",
    // kubectl-virt: the kubectl plugin; kubectl_complete-virt: what kubectl runs to complete `kubectl virt ...`.
    bin: { virtctl: "bin/virtctl.mjs", "kubectl-virt": "bin/virtctl.mjs", "kubectl_complete-virt": "bin/virtctl.mjs" },
    files: ["bin", "README.md"],
    engines: { node: `>=${MIN_NODE_MAJOR}` },
  };
  writeFileSync(join(outDir, "package.json"), `${JSON.stringify(manifest, null, 2)}\n`);
}

/**
 * Bundles virtctl into `outDir/package` and packs it into `outDir`. Needs the repository's dev install (rolldown,
 * the sources' packages) and `npm` on PATH; rejects when the bundle or `npm pack` fails. Replaces an older build.
 */
export async function buildPackage(outDir = join(PROJECT_DIR, "build")): Promise<BuiltPackage> {
  const dir = join(outDir, "package");
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  await bundle(dir);
  const entry = join(dir, "bin", "virtctl.mjs");
  const code = readFileSync(entry, "utf8");
  if (!code.startsWith("#!")) writeFileSync(entry, `#!/usr/bin/env node\n${code}`);
  chmodSync(entry, 0o755);
  const project = JSON.parse(readFileSync(join(PROJECT_DIR, "package.json"), "utf8")) as ProjectManifest;
  writeManifest(dir, project);
  copyFileSync(join(PROJECT_DIR, "README.md"), join(dir, "README.md"));
  const out = execFileSync("npm", ["pack", dir, "--pack-destination", outDir, "--json"], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
  });
  const [packed] = JSON.parse(out) as Array<{ filename: string }>;
  if (!packed) throw new Error(`npm pack ${dir} printed no package: ${out}`);
  return { dir, tarball: join(outDir, packed.filename) };
}

if (import.meta.main) {
  const built = await buildPackage(process.argv[2]);
  process.stdout.write(`${built.tarball}\n`);
  process.stdout.write(`Install it with: npm install -g ${built.tarball}\n`);
}
