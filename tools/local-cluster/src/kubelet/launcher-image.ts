/**
 * The node's virt-launcher "image": the launcher's module graph bundled into a few ES modules once, when the node
 * starts, as a container image ships pre-built code. Every launcher otherwise resolves, reads and links ~250
 * TypeScript and package modules one by one (about half its start-up CPU: ~220 -> ~100 ms per launcher, and a
 * density test starts one per VMI). The bundle is built from the sources as they are when the node starts.
 *
 * Module-relative paths keep working: each module's `import.meta.url` is replaced by its own source file's URL
 * (the native addon, the test guest and the image store are found beside the sources, not beside the bundle).
 * Modules only some launchers need (the API client for `--kubeconfig`, YAML) stay separate chunks, loaded on demand.
 */
import { join } from "node:path";
import { pathToFileURL } from "node:url";

/** The TypeScript entry point the image is built from. */
export function launcherSourceEntry(projectRoot: string): string {
  return join(projectRoot, "apps/virt-launcher/src/main.ts");
}

/**
 * Bundles virt-launcher into `outDir` and returns the entry module's path. Rejects when the bundler (rolldown) is
 * not installed or the build fails; the caller then runs the sources.
 */
export async function buildLauncherImage(projectRoot: string, outDir: string): Promise<string> {
  const { rolldown } = await import("rolldown");
  const bundle = await rolldown({
    input: launcherSourceEntry(projectRoot),
    platform: "node",
    logLevel: "silent",
    plugins: [
      {
        name: "kvt-module-urls",
        transform(code: string, id: string) {
          if (!code.includes("import.meta.url")) return null;
          return { code: code.replaceAll("import.meta.url", JSON.stringify(pathToFileURL(id).href)) };
        },
      },
    ],
  });
  try {
    await bundle.write({ dir: outDir, format: "esm", entryFileNames: "virt-launcher.mjs" });
  } finally {
    await bundle.close();
  }
  return join(outDir, "virt-launcher.mjs");
}
