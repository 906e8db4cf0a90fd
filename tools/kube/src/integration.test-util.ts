/**
 * What the real-binary integration tests share: whether they can run here (the Kubernetes binaries built, root for
 * network namespaces, cgroups and mounts), the note their suite names carry when skipped, and the build's kubectl.
 */
import { execFile } from "node:child_process";
import { join } from "node:path";
import { binariesReady, binDir, DEFAULT_DATA_DIR } from "./build.ts";

/** True when `npm run kube -- build` has built the binaries. */
export const BUILT = binariesReady(DEFAULT_DATA_DIR);
/** True when this process is root. */
export const ROOT = process.getuid?.() === 0;

/** The suffix of a suite's name: why it is skipped (root needed for `rootFor`), or nothing when it runs. */
export function skipNote(rootFor: string): string {
  if (!BUILT) return " (skipped: binaries not built; run `npm run kube -- build` first)";
  return ROOT ? "" : ` (skipped: needs root for ${rootFor})`;
}

/** kubectl from the build with `kubeconfig`, `input` on its stdin; resolves with stdout, rejects with its stderr. */
export function kubectlWithInput(kubeconfig: string, input: string, ...args: string[]): Promise<string> {
  const bin = join(binDir(DEFAULT_DATA_DIR), "kubectl");
  return new Promise((resolve, reject) => {
    const child = execFile(bin, ["--kubeconfig", kubeconfig, ...args], { timeout: 150_000 }, (error, stdout, stderr) =>
      error
        ? reject(new Error(`kubectl ${args.join(" ")}: ${stderr.trim() || error.message}`))
        : resolve(stdout.trim()),
    );
    child.stdin?.end(input);
  });
}
