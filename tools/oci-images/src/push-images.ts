/**
 * `pushImages()`: copies images from the OCI layout to a registry with skopeo, over plain HTTP when asked (a local
 * registry on 127.0.0.1 has no TLS), and `pullImage()`, the way back into a fresh OCI layout.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { BuiltImage } from "./build-images.ts";
import { ensureHostTools, PUSH_TOOLS, run } from "./host-tools.ts";
import type { OciLayout } from "./oci-layout.ts";

/** Options of {@link pushImages}. */
export interface PushOptions {
  /** `HOST:PORT` of the registry. */
  readonly registry: string;
  /** Talk plain HTTP and accept any certificate (a local registry); default true for 127.0.0.1/localhost. */
  readonly insecure?: boolean;
  /**
   * A directory with the registry's CA (`*.crt`) and a client certificate (`*.cert` + `*.key`), as skopeo's
   * `--dest-cert-dir`/`--src-cert-dir` take it: for a registry that asks for client certificates.
   */
  readonly certDir?: string;
  /** Folder for skopeo's signature policy file. */
  readonly workDir: string;
  readonly log?: (line: string) => void;
}

/**
 * skopeo wants a signature policy (/etc/containers/policy.json), which Debian's skopeo does not always install. These
 * are our own images going to a registry we name, so the policy accepts anything; a file of ours keeps the result
 * independent of the machine's configuration.
 */
function policyFile(workDir: string): string {
  mkdirSync(workDir, { recursive: true });
  const file = join(workDir, "skopeo-policy.json");
  writeFileSync(file, `${JSON.stringify({ default: [{ type: "insecureAcceptAnything" }] })}\n`);
  return file;
}

function isLocal(registry: string): boolean {
  return /^(127\.|localhost[:]|\[::1\])/.test(registry);
}

/** Pushes each of `images` as `<registry>/<reference>`; returns the references pushed. */
export async function pushImages(
  layout: OciLayout,
  images: readonly BuiltImage[],
  options: PushOptions,
): Promise<string[]> {
  const log = options.log ?? ((): void => {});
  await ensureHostTools(PUSH_TOOLS, log);
  const policy = policyFile(options.workDir);
  const tls = [`--dest-tls-verify=${!(options.insecure ?? isLocal(options.registry))}`];
  if (options.certDir) tls.push("--dest-cert-dir", options.certDir);
  const pushed: string[] = [];
  for (const image of images) {
    const dest = `${options.registry}/${image.reference}`;
    log(`pushing ${image.tag} -> ${dest}`);
    const onLine = (line: string): void => log(`  ${line}`);
    await run("skopeo", ["--policy", policy, "copy", ...tls, `oci:${layout.ref(image.tag)}`, `docker://${dest}`], {
      onLine,
    });
    pushed.push(dest);
  }
  return pushed;
}

/** Pulls `source` (`HOST:PORT/repo:tag`) into the OCI layout at `layoutDir` as tag `tag`. */
export async function pullImage(
  source: string,
  layoutDir: string,
  tag: string,
  options: Omit<PushOptions, "registry">,
): Promise<void> {
  const policy = policyFile(options.workDir);
  const tls = [`--src-tls-verify=${!(options.insecure ?? isLocal(source))}`];
  if (options.certDir) tls.push("--src-cert-dir", options.certDir);
  await run("skopeo", ["--policy", policy, "copy", ...tls, `docker://${source}`, `oci:${layoutDir}:${tag}`]);
}
