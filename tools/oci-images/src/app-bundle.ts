/**
 * One app's code for its image: the app's module graph bundled by the local cluster's launcher-image bundler
 * (`bundleEntry`: rolldown, built-ins through `require`, each module's `import.meta.url` kept as its source file's
 * URL), then those source URLs moved from this checkout to {@link APP_ROOT}, so module-relative paths (the native
 * addon beside native/index.ts, the image store) resolve inside the image as they do in the repository.
 *
 * ```
 * /opt/kubevirt-ts/bundle/<app>/<app>.mjs      the entry (the image's entrypoint runs it with Node)
 * /opt/kubevirt-ts/bundle/<app>/*.js           chunks loaded on demand (ES modules: package.json says so)
 * /opt/kubevirt-ts/native/build/kvm_native.node the addon, where native/index.ts looks for it (when the app loads it)
 * /opt/kubevirt-ts/<path>                      files a bundled module reads beside itself ({@link MODULE_ASSETS})
 * ```
 */
import { readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { bundleEntry } from "@kvt/local-cluster";

/** Where the project's files live in the images (the checkout's root maps here). */
export const APP_ROOT = "/opt/kubevirt-ts";

/** A bundled app. */
export interface AppBundle {
  /** Folder holding the entry and its chunks. */
  readonly dir: string;
  /** The entry's path inside the image. */
  readonly entry: string;
  /** Whether the bundle loads the native addon (then the image carries it). */
  readonly usesAddon: boolean;
  /** Files its modules read beside themselves: `from` in this checkout, `to` in the image. */
  readonly assets: readonly { readonly from: string; readonly to: string }[];
}

/**
 * Files a module reads relative to its own `import.meta.url`, by the module's path in the checkout: a bundle that
 * holds the module carries them at the same relative place under {@link APP_ROOT}.
 */
export const MODULE_ASSETS: Readonly<Record<string, readonly string[]>> = {
  // @kvt/device-plugin loads the kubelet's device plugin API from its .proto (virt-handler's device plugins).
  "libs/device-plugin/src/api.ts": ["libs/device-plugin/proto/api.proto"],
};

/**
 * Bundles `apps/<app>/src/<entry>.ts` (default main.ts) of the checkout at `projectRoot` into `outDir`, with paths for
 * the image; the entry module is `<name>.mjs` (default `<app>.mjs`) under `${APP_ROOT}/bundle/<name>/`.
 */
export async function bundleApp(
  projectRoot: string,
  app: string,
  outDir: string,
  entry: { readonly source: string; readonly name: string } = { source: "main", name: app },
): Promise<AppBundle> {
  rmSync(outDir, { recursive: true, force: true });
  await bundleEntry(join(projectRoot, "apps", app, `src/${entry.source}.ts`), outDir, `${entry.name}.mjs`);
  const fromUrl = pathToFileURL(projectRoot.endsWith("/") ? projectRoot : `${projectRoot}/`).href;
  const toUrl = `file://${APP_ROOT}/`;
  let usesAddon = false;
  const assets = new Set<string>();
  for (const name of readdirSync(outDir)) {
    if (!/\.m?js$/.test(name)) continue;
    const file = join(outDir, name);
    const code = readFileSync(file, "utf8");
    if (code.includes("kvm_native.node")) usesAddon = true;
    for (const [module, files] of Object.entries(MODULE_ASSETS))
      if (code.includes(`${fromUrl}${module}`)) for (const f of files) assets.add(f);
    if (code.includes(fromUrl)) writeFileSync(file, code.replaceAll(fromUrl, toUrl));
  }
  // The chunks are ES modules named .js: say so, rather than have Node guess from their syntax on every load.
  writeFileSync(join(outDir, "package.json"), `${JSON.stringify({ type: "module" })}\n`);
  return {
    dir: outDir,
    entry: `${APP_ROOT}/bundle/${entry.name}/${entry.name}.mjs`,
    usesAddon,
    assets: [...assets].map((f) => ({ from: join(projectRoot, f), to: `${APP_ROOT}/${f}` })),
  };
}
