/**
 * The build stamp `<bin-dir>/stamp.json`: which versions and which Go made the binaries beside it, how long that
 * took and how big each is. The build has steps (one Go module each: kubernetes, etcd, containerd, kwok,
 * local-path); a step is
 * skipped when the stamp records its pinned version, the machine's Go is the stamp's, and each of its binaries is
 * still there, so bumping one pin (or adding a step) rebuilds only that step (pure decision; the caller reads the
 * files).
 */

/** The build's steps, in build order: each is one Go module with its own pinned version. */
export const BUILD_STEPS = ["kubernetes", "etcd", "containerd", "kwok", "local-path"] as const;

/** One build step. */
export type BuildStep = (typeof BUILD_STEPS)[number];

/** What the binaries are to be built from: each step's version, and `go version`'s version (e.g. `go1.26.8`). */
export type BuildInputs = Readonly<Record<BuildStep, string>> & { readonly go: string };

/** The stamp written after a successful build; a step missing from it (a stamp from before it existed) is unbuilt. */
export type BuildStamp = Readonly<Partial<Record<BuildStep, string>>> & {
  readonly go: string;
  /** Wall-clock seconds per step (`kubernetes`, ..., `local-path`), downloads included. */
  readonly seconds: Readonly<Record<string, number>>;
  /** Size in bytes of each binary, by file name. */
  readonly sizes: Readonly<Record<string, number>>;
  /** When the build last finished (ISO 8601). */
  readonly builtAt: string;
};

/**
 * Why each step must be built, by step; a step that is current is absent (an empty result: nothing to build).
 * `binaries` names each step's binaries; `exists` says whether one is in the bin directory.
 */
export function staleSteps(
  stamp: BuildStamp | undefined,
  want: BuildInputs,
  binaries: Readonly<Record<BuildStep, readonly string[]>>,
  exists: (name: string) => boolean,
): Partial<Record<BuildStep, string>> {
  const reasons: Partial<Record<BuildStep, string>> = {};
  for (const step of BUILD_STEPS) {
    const have = stamp?.[step];
    const missing = binaries[step].filter((b) => !exists(b));
    if (!stamp) reasons[step] = "no build yet";
    else if (stamp.go !== want.go) reasons[step] = `go changed: ${stamp.go} -> ${want.go}`;
    else if (have === undefined) reasons[step] = `${step} ${want[step]} not built yet`;
    else if (have !== want[step]) reasons[step] = `${step} changed: ${have} -> ${want[step]}`;
    else if (missing.length > 0) reasons[step] = `missing binaries: ${missing.join(", ")}`;
  }
  return reasons;
}

/** The stamp after building `built` steps on top of `previous` (kept only when it was made by the same Go). */
export function mergeStamp(
  previous: BuildStamp | undefined,
  want: BuildInputs,
  built: Readonly<Partial<Record<BuildStep, number>>>,
  sizes: Readonly<Record<string, number>>,
  builtAt: string,
): BuildStamp {
  const kept = previous?.go === want.go ? previous : undefined;
  const versions: Partial<Record<BuildStep, string>> = {};
  for (const step of BUILD_STEPS) {
    const version = step in built ? want[step] : kept?.[step];
    if (version !== undefined) versions[step] = version;
  }
  return { ...versions, go: want.go, seconds: { ...kept?.seconds, ...built }, sizes, builtAt };
}

/** Parses a stamp file's text; undefined when it is not a stamp (a half-written or foreign file means: rebuild). */
export function parseStamp(text: string): BuildStamp | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof value !== "object" || value === null) return undefined;
  const v = value as Record<string, unknown>;
  const strings = ["go", "builtAt"].every((k) => typeof v[k] === "string");
  const steps = BUILD_STEPS.every((k) => v[k] === undefined || typeof v[k] === "string");
  const records = ["seconds", "sizes"].every((k) => typeof v[k] === "object" && v[k] !== null);
  return strings && steps && records ? (v as unknown as BuildStamp) : undefined;
}
