/**
 * The build stamp `<bin-dir>/stamp.json`: which versions and which Go made the binaries beside it, how long that
 * took and how big each is. A build is skipped when the stamp matches the pinned versions and the machine's Go and
 * every binary it lists is still there (pure decision; the caller reads the files).
 */

/** What the binaries were built from. */
export interface BuildInputs {
  readonly kubernetes: string;
  readonly etcd: string;
  readonly containerd: string;
  /** `go version`'s version, e.g. `go1.26.8`. */
  readonly go: string;
}

/** The stamp written after a successful build. */
export interface BuildStamp extends BuildInputs {
  /** Wall-clock seconds per step (`kubernetes`, `etcd`, `containerd`), downloads included. */
  readonly seconds: Readonly<Record<string, number>>;
  /** Size in bytes of each binary, by file name. */
  readonly sizes: Readonly<Record<string, number>>;
  /** When the build finished (ISO 8601). */
  readonly builtAt: string;
}

/** Why a build is needed, or undefined when the stamp is current. */
export function staleReason(
  stamp: BuildStamp | undefined,
  want: BuildInputs,
  binaries: readonly string[],
  exists: (name: string) => boolean,
): string | undefined {
  if (!stamp) return "no build yet";
  for (const key of ["kubernetes", "etcd", "containerd", "go"] as const) {
    if (stamp[key] !== want[key]) return `${key} changed: ${stamp[key]} -> ${want[key]}`;
  }
  const missing = binaries.filter((b) => !exists(b));
  if (missing.length > 0) return `missing binaries: ${missing.join(", ")}`;
  return undefined;
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
  const strings = ["kubernetes", "etcd", "containerd", "go", "builtAt"].every((k) => typeof v[k] === "string");
  const records = ["seconds", "sizes"].every((k) => typeof v[k] === "object" && v[k] !== null);
  return strings && records ? (v as unknown as BuildStamp) : undefined;
}
