/**
 * A lean kubeconfig reader (the `yaml` package only), so virtctl starts fast: it resolves files, contexts,
 * clusters and users like kubectl (KUBECONFIG lists merge; for each name and for `current-context` the first
 * file that sets it wins; relative file paths are relative to the file that names them). Users with `exec` or
 * `auth-provider` credentials are handed to @kubernetes/client-node, loaded only then.
 */
import { existsSync, readFileSync } from "node:fs";
import { dirname, isAbsolute, join, resolve } from "node:path";
import { parse } from "yaml";

/** A cluster entry. */
export interface ClusterEntry {
  server: string;
  "certificate-authority"?: string;
  "certificate-authority-data"?: string;
  "insecure-skip-tls-verify"?: boolean;
  "tls-server-name"?: string;
}

/** A user entry. */
export interface UserEntry {
  token?: string;
  tokenFile?: string;
  "client-certificate"?: string;
  "client-certificate-data"?: string;
  "client-key"?: string;
  "client-key-data"?: string;
  username?: string;
  password?: string;
  exec?: unknown;
  "auth-provider"?: unknown;
}

/** A context entry. */
export interface ContextEntry {
  cluster: string;
  user?: string;
  namespace?: string;
}

/** The merged view of one or more kubeconfig files. */
export interface MergedConfig {
  currentContext?: string;
  clusters: Map<string, ClusterEntry>;
  users: Map<string, UserEntry>;
  contexts: Map<string, ContextEntry>;
  /** The files read, in order. */
  files: string[];
}

interface RawFile {
  "current-context"?: string;
  clusters?: Array<{ name: string; cluster: ClusterEntry }>;
  users?: Array<{ name: string; user: UserEntry }>;
  contexts?: Array<{ name: string; context: ContextEntry }>;
}

const PATH_KEYS = ["certificate-authority", "client-certificate", "client-key", "tokenFile"] as const;

function absolutize<T extends object>(entry: T, base: string): T {
  const out = { ...entry } as Record<string, unknown>;
  for (const key of PATH_KEYS) {
    const value = out[key];
    if (typeof value === "string" && value !== "" && !isAbsolute(value)) out[key] = resolve(base, value);
  }
  return out as T;
}

function mergeFile(into: MergedConfig, file: string): void {
  let raw: RawFile | null;
  try {
    raw = parse(readFileSync(file, "utf8")) as RawFile | null;
  } catch (error) {
    throw new Error(`error loading config file "${file}": ${(error as Error).message}`, { cause: error });
  }
  if (!raw) return;
  const base = dirname(file);
  into.files.push(file);
  into.currentContext ??= raw["current-context"] || undefined;
  for (const c of raw.clusters ?? [])
    if (c?.name && !into.clusters.has(c.name)) into.clusters.set(c.name, absolutize(c.cluster ?? { server: "" }, base));
  for (const u of raw.users ?? [])
    if (u?.name && !into.users.has(u.name)) into.users.set(u.name, absolutize(u.user ?? {}, base));
  for (const x of raw.contexts ?? []) if (x?.name && !into.contexts.has(x.name)) into.contexts.set(x.name, x.context);
}

/**
 * Reads the kubeconfig: `explicit` (--kubeconfig) if given, else every existing file in `$KUBECONFIG`, else
 * `$HOME/.kube/config`. Returns undefined when there is none.
 */
export function readKubeconfig(
  explicit: string | undefined,
  env: Readonly<Record<string, string | undefined>>,
): MergedConfig | undefined {
  const merged: MergedConfig = { clusters: new Map(), users: new Map(), contexts: new Map(), files: [] };
  let files: string[];
  if (explicit) {
    if (!existsSync(explicit)) throw new Error(`stat ${explicit}: no such file or directory`);
    files = [explicit];
  } else if (env.KUBECONFIG) {
    files = env.KUBECONFIG.split(":").filter((f) => f !== "" && existsSync(f));
  } else {
    const home = env.HOME ? join(env.HOME, ".kube", "config") : undefined;
    files = home && existsSync(home) ? [home] : [];
  }
  for (const f of files) mergeFile(merged, f);
  return merged.files.length > 0 ? merged : undefined;
}

/** Reads a `*-data` (base64) or file-path credential. */
export function material(data: string | undefined, file: string | undefined): Buffer | undefined {
  if (data) return Buffer.from(data, "base64");
  if (file) return readFileSync(file);
  return undefined;
}
