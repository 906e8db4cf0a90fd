/**
 * Parses a resource URL the way k8s.io/apiserver's RequestInfoFactory does:
 *
 *   /api/v1[/watch]/[namespaces/NS/]RESOURCE[/NAME[/SUB...]]
 *   /apis/GROUP/VERSION[/watch]/[namespaces/NS/]RESOURCE[/NAME[/SUB...]]
 *   /api/v1/namespaces/NAME[/status|/finalize]           (the namespace object itself)
 */
import { badRequest } from "../errors.ts";

/** A parsed resource request. */
export interface RequestInfo {
  readonly group: string;
  readonly version: string;
  readonly namespace: string | undefined;
  readonly resource: string;
  readonly name: string | undefined;
  readonly subresource: string;
  /** Path segments after the subresource (e.g. a proxy path). */
  readonly rest: readonly string[];
  readonly legacyWatch: boolean;
}

/** Parses `path` (no query), or undefined if it is not a resource path. */
export function parseResourcePath(path: string): RequestInfo | undefined {
  let parts: string[];
  try {
    parts = path
      .split("/")
      .filter((p) => p !== "")
      .map((p) => decodeURIComponent(p));
  } catch {
    throw badRequest(`malformed path: ${JSON.stringify(path)}`);
  }
  let group: string;
  let version: string;
  let i: number;
  if (parts[0] === "api" && parts.length >= 3) {
    group = "";
    version = parts[1];
    i = 2;
  } else if (parts[0] === "apis" && parts.length >= 4) {
    group = parts[1];
    version = parts[2];
    i = 3;
  } else return undefined;
  let cur = parts.slice(i);
  let legacyWatch = false;
  if (cur[0] === "watch") {
    legacyWatch = true;
    cur = cur.slice(1);
  }
  let namespace: string | undefined;
  if (cur[0] === "namespaces" && cur.length > 1) {
    namespace = cur[1];
    if (cur.length > 2 && cur[2] !== "status" && cur[2] !== "finalize") cur = cur.slice(2);
    else
      return {
        group,
        version,
        namespace: undefined,
        resource: "namespaces",
        name: namespace,
        subresource: cur[2] ?? "",
        rest: cur.slice(3),
        legacyWatch,
      };
  }
  if (cur.length === 0) return undefined;
  return {
    group,
    version,
    namespace,
    resource: cur[0],
    name: cur[1],
    subresource: cur[2] ?? "",
    rest: cur.slice(3),
    legacyWatch,
  };
}
