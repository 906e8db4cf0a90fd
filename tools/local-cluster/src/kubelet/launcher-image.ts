/**
 * The node's virt-launcher "image": the launcher's module graph bundled into a few ES modules once, when the node
 * starts, as a container image ships pre-built code. Every launcher otherwise resolves, reads and links ~250
 * TypeScript and package modules one by one (about half its start-up CPU: ~220 -> ~100 ms per launcher, and a
 * density test starts one per VMI). The bundle is built from the sources as they are when the node starts.
 *
 * Module-relative paths keep working: each module's `import.meta.url` is replaced by its own source file's URL
 * (the native addon, the test guest and the image store are found beside the sources, not beside the bundle).
 * Modules only some launchers need (the API client for `--kubeconfig`, YAML) stay separate chunks, loaded on demand.
 *
 * The project's own modules take Node built-ins with `require`, not `import`: an ES import of a built-in builds its
 * namespace from every export, which runs the module's lazy getters. `http.WebSocket`'s loads undici and with it TLS,
 * HTTP/2, zlib and web streams (about 55 ms of CPU and 14 MiB of memory per launcher, for nothing); `fs.promises`
 * loads the stream and readline modules (1.5 MiB). Packages' own imports are left as they are (the ones in the
 * launcher's start-up path are CommonJS and already `require`).
 */
import { execFile } from "node:child_process";
import { builtinModules, createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";

const BUILTIN_PREFIX = "\0kvt-builtin:";
/**
 * The expression `import.meta.url`, not the same text inside a string or after a quote (this module's own source
 * mentions it in strings, and is itself bundled into the process-kubelet's image).
 */
const META_URL = /(?<![\w$."'`])import\.meta\.url(?![\w$])/g;
const requireHere = createRequire(import.meta.url);
const execFileAsync = promisify(execFile);

/** `const requireHere = createRequire(import.meta.url);`: a module that loads packages lazily, by name. */
const CREATE_REQUIRE = /\bconst\s+([A-Za-z_$][\w$]*)\s*=\s*createRequire\(\s*import\.meta\.url\s*\)/g;

/**
 * Rewrites a project module's lazy `requireHere("package")` calls (`requireHere` made by `createRequire`) into plain
 * `require("package")`, which the bundler follows: the package then travels in the bundle, still evaluated only at
 * the call (a CommonJS wrapper), and an image without node_modules finds it. Built-ins and calls with a computed
 * name are left as they are. Returns `code` itself when nothing matched.
 */
export function bundleLazyRequires(code: string): string {
  if (!code.includes("createRequire")) return code;
  let out = code;
  for (const [, name] of code.matchAll(CREATE_REQUIRE)) {
    const call = new RegExp(`(?<![\\w$.])${name.replace(/\$/g, "\\$")}\\(\\s*(["'])([^"'\\s]+)\\1\\s*\\)`, "g");
    out = out.replace(call, (whole, quote: string, id: string) =>
      id.startsWith("node:") || builtinModules.includes(id) || id.startsWith(".")
        ? whole
        : `require(${quote}${id}${quote})`,
    );
  }
  return out;
}

/** Whether `id`, imported by `importer`, is a built-in of Node imported by one of the project's modules. */
function isProjectBuiltinImport(id: string, importer: string | undefined): boolean {
  if (!importer || importer.includes("/node_modules/") || importer.startsWith("\0")) return false;
  if (id === "node:module" || id === "module") return false;
  return id.startsWith("node:") || builtinModules.includes(id);
}

/**
 * An ES module that re-exports built-in `id` through `require`: its plain data properties as named exports (read
 * once, at import: a built-in's functions and classes do not change), the module object as the default export.
 * Accessor properties (lazy getters such as `http.WebSocket`, `fs.promises`) are reached through the default export
 * only: reading them is what costs. A project module that imports one by name fails the build (MISSING_EXPORT).
 */
export function builtinShim(id: string): string {
  const name = id.startsWith("node:") ? id : `node:${id}`;
  const mod = requireHere(name) as Record<string, unknown>;
  const names = Object.keys(mod).filter(
    (k) => /^[A-Za-z_$][\w$]*$/.test(k) && k !== "default" && !Object.getOwnPropertyDescriptor(mod, k)?.get,
  );
  return [
    `import { builtinModules, createRequire } from "node:module";`,
    `const m = createRequire(import.meta.url)(${JSON.stringify(name)});`,
    "export default m;",
    ...names.map((k) => `export const ${k} = m.${k};`),
  ].join("\n");
}

/** The TypeScript entry point the image is built from. */
export function launcherSourceEntry(projectRoot: string): string {
  return join(projectRoot, "apps/virt-launcher/src/main.ts");
}

/**
 * Bundles virt-launcher into `outDir` and returns the entry module's path. Rejects when the bundler (rolldown) is
 * not installed or the build fails; the caller then runs the sources.
 *
 * The bundler runs in a child process (`bundle-cli.ts`): rolldown keeps about 570 MiB resident in the process that
 * ran it (its native thread pools and arenas), which made every process-kubelet hold 700+ MiB for its lifetime.
 */
export async function buildLauncherImage(projectRoot: string, outDir: string): Promise<string> {
  const cli = new URL("./bundle-cli.ts", import.meta.url).pathname;
  const args = [cli, launcherSourceEntry(projectRoot), outDir, "virt-launcher.mjs"];
  try {
    const { stdout } = await execFileAsync(process.execPath, args, { maxBuffer: 1 << 20 });
    return stdout.trim();
  } catch (error) {
    const stderr = (error as { stderr?: string }).stderr?.trim();
    throw new Error(`Cannot bundle virt-launcher${stderr ? `: ${stderr}` : ""}`, { cause: error });
  }
}

/**
 * Bundles any app's TypeScript entry point (`entry`) the same way as the launcher image, into `outDir` with the entry
 * module named `entryFileName`, and returns its path (the container images of tools/oci-images bundle every app so).
 */
export async function bundleEntry(entry: string, outDir: string, entryFileName: string): Promise<string> {
  const name = entryFileName.replace(/\.m?js$/, "");
  const written = await bundleEntries({ [name]: entry }, outDir, entryFileName.endsWith(".js") ? ".js" : ".mjs");
  return written[name];
}

/** `new URL("./x.ts", import.meta.url)`: how a module names a worker thread's entry beside it. */
const WORKER_URL = /new URL\((["'])(\.{1,2}\/[^"']+\.ts)\1,\s*import\.meta\.url\)/g;

/**
 * Bundles several entry points in one build (`inputs`: name -> TypeScript entry), so modules they share land in
 * shared chunks; each entry module is `<name><extension>` in `outDir`. Returns name -> the entry module's path.
 * `workers` (name -> TypeScript entry of a worker thread) are bundled alike, and a module that starts one by
 * `new URL("./its-entry.ts", import.meta.url)` gets the bundled worker's URL instead: a worker running sources
 * pays for the type stripper in its own isolate (about 13 MiB each).
 */
export async function bundleEntries(
  inputs: Readonly<Record<string, string>>,
  outDir: string,
  extension = ".mjs",
  workers: Readonly<Record<string, string>> = {},
): Promise<Record<string, string>> {
  const { rolldown } = await import("rolldown");
  const workerByEntry = new Map(Object.entries(workers).map(([name, entry]) => [resolve(entry), name]));
  const workerUrls = (code: string, id: string): string =>
    code.replace(WORKER_URL, (whole, _quote: string, rel: string) => {
      const name = workerByEntry.get(resolve(dirname(id), rel));
      return name === undefined
        ? whole
        : `new URL(${JSON.stringify(pathToFileURL(join(outDir, `${name}${extension}`)).href)})`;
    });
  const bundle = await rolldown({
    input: { ...inputs, ...workers },
    platform: "node",
    logLevel: "silent",
    plugins: [
      {
        name: "kvt-builtins-by-require",
        resolveId(id: string, importer: string | undefined) {
          if (!isProjectBuiltinImport(id, importer)) return null;
          return { id: `${BUILTIN_PREFIX}${id}` };
        },
        load(id: string) {
          return id.startsWith(BUILTIN_PREFIX) ? builtinShim(id.slice(BUILTIN_PREFIX.length)) : null;
        },
      },
      {
        name: "kvt-lazy-requires",
        transform(code: string, id: string) {
          if (id.includes("/node_modules/") || id.startsWith("\0")) return null;
          const replaced = bundleLazyRequires(code);
          return replaced === code ? null : { code: replaced };
        },
      },
      {
        name: "kvt-module-urls",
        transform(code: string, id: string) {
          if (!code.includes("import.meta.url")) return null; // most modules: skip both regex passes
          const replaced = workerUrls(code, id).replace(META_URL, JSON.stringify(pathToFileURL(id).href));
          return replaced === code ? null : { code: replaced };
        },
      },
    ],
  });
  try {
    await bundle.write({ dir: outDir, format: "esm", entryFileNames: `[name]${extension}` });
  } finally {
    await bundle.close();
  }
  return Object.fromEntries(Object.keys(inputs).map((name) => [name, join(outDir, `${name}${extension}`)]));
}
