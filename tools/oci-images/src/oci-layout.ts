/**
 * The OCI image layout the images are built in (one layout, one tag per image and per intermediate stage), driven
 * through umoci. An image is a chain of tags: each stage is its parent plus one layer (`umoci insert --tag`), so
 * images that share a parent share its layers' blobs (the four component images share one Debian + Node layer).
 *
 * ```
 * <layout>/oci-layout, index.json, blobs/sha256/...   the OCI layout (tags in index.json)
 * <layout>.state.json                                per tag: the key of the inputs it was built from
 * ```
 * A tag whose recorded key matches is reused, so an unchanged image costs only the digest of its layer trees.
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { run } from "./host-tools.ts";

/** Image config applied to a finished image (`umoci config`). */
export interface ImageConfig {
  readonly entrypoint?: readonly string[];
  readonly env?: readonly string[];
  readonly user?: string;
  readonly workingDir?: string;
  readonly labels?: Readonly<Record<string, string>>;
}

interface OciDescriptor {
  readonly mediaType: string;
  readonly digest: string;
  readonly size: number;
  readonly annotations?: Readonly<Record<string, string>>;
}

/** A tag's manifest facts: its digest, and its layers' compressed sizes. */
export interface TagInfo {
  readonly manifestDigest: string;
  readonly layers: readonly { readonly digest: string; readonly size: number }[];
  /** Compressed size: the sum of the layers' blob sizes (what a pull downloads). */
  readonly compressedBytes: number;
}

/** Fixed creation time of every image (reproducible configs); the layers' file times are fixed too. */
const CREATED = "2026-01-01T00:00:00Z";

/** One OCI layout on disk. */
export class OciLayout {
  readonly dir: string;
  readonly #stateFile: string;
  #state: Record<string, string>;

  /** Opens (or later creates) the layout at `dir`; its build state lives beside it. */
  constructor(dir: string) {
    this.dir = dir;
    this.#stateFile = `${dir}.state.json`;
    this.#state = existsSync(this.#stateFile)
      ? (JSON.parse(readFileSync(this.#stateFile, "utf8")) as Record<string, string>)
      : {};
  }

  /** Creates the layout when it does not exist yet. */
  async init(): Promise<void> {
    if (!existsSync(join(this.dir, "index.json"))) {
      this.#state = {};
      await run("umoci", ["init", "--layout", this.dir]);
    }
  }

  /** `layout:tag`, as umoci and skopeo's `oci:` transport take it. */
  ref(tag: string): string {
    return `${this.dir}:${tag}`;
  }

  /** Whether `tag` exists and was built from inputs with `key`. */
  isCurrent(tag: string, key: string): boolean {
    return this.#state[tag] === key && this.#descriptor(tag) !== undefined;
  }

  /** Makes `tag` an empty image (no layers; umoci's default config for linux/amd64). */
  async newImage(tag: string): Promise<void> {
    await run("umoci", ["new", "--image", this.ref(tag)]);
  }

  /** Makes `tag` = `parent` plus one layer holding the tree at `layerDir` (placed at `/`). */
  async addLayer(parent: string, tag: string, layerDir: string, comment: string): Promise<void> {
    await run("umoci", [
      "insert",
      "--image",
      this.ref(parent),
      "--tag",
      tag,
      "--history.created",
      CREATED,
      "--history.created_by",
      "kubevirt-ts tools/oci-images",
      "--history.comment",
      comment,
      layerDir,
      "/",
    ]);
  }

  /** Applies `config` to `tag` in place (entrypoint, environment, user, labels, creation time). */
  async configure(tag: string, config: ImageConfig): Promise<void> {
    const args = ["config", "--image", this.ref(tag), "--no-history", "--created", CREATED];
    args.push("--architecture", "amd64", "--os", "linux");
    for (const e of config.entrypoint ?? []) args.push("--config.entrypoint", e);
    for (const e of config.env ?? []) args.push("--config.env", e);
    if (config.user !== undefined) args.push("--config.user", config.user);
    if (config.workingDir !== undefined) args.push("--config.workingdir", config.workingDir);
    for (const [k, v] of Object.entries(config.labels ?? {})) args.push("--config.label", `${k}=${v}`);
    await run("umoci", args);
  }

  /** Records that `tag` was built from inputs with `key`. */
  markBuilt(tag: string, key: string): void {
    this.#state[tag] = key;
    writeFileSync(this.#stateFile, `${JSON.stringify(this.#state, null, 2)}\n`);
  }

  /** Removes blobs no tag references any more (left by rebuilt images). */
  async gc(): Promise<void> {
    await run("umoci", ["gc", "--layout", this.dir]);
  }

  /** The manifest digest and layer sizes of `tag`; throws when it does not exist. */
  info(tag: string): TagInfo {
    const desc = this.#descriptor(tag);
    if (!desc) throw new Error(`No tag ${tag} in the OCI layout ${this.dir}`);
    const manifest = JSON.parse(readFileSync(this.#blob(desc.digest), "utf8")) as { layers: OciDescriptor[] };
    const layers = manifest.layers.map((l) => ({ digest: l.digest, size: l.size }));
    return { manifestDigest: desc.digest, layers, compressedBytes: layers.reduce((n, l) => n + l.size, 0) };
  }

  #blob(digest: string): string {
    return join(this.dir, "blobs", ...digest.split(":"));
  }

  #descriptor(tag: string): OciDescriptor | undefined {
    const index = join(this.dir, "index.json");
    if (!existsSync(index)) return undefined;
    const { manifests } = JSON.parse(readFileSync(index, "utf8")) as { manifests?: OciDescriptor[] };
    return manifests?.find((m) => m.annotations?.["org.opencontainers.image.ref.name"] === tag);
  }
}
