/**
 * Failures to reach or be accepted by the API server, said as one line that names the server, the kubeconfig and
 * context in use, and what to check next (kubectl's "The connection to the server ... was refused - did you specify
 * the right host or port?", with more to go on). The client turns Node's socket, DNS and TLS errors into
 * {@link ConnectionError}; 401 and 403 answers stay @kvt/kube `ApiError`s, which {@link failureLine} follows with an
 * {@link authHint}. The CLI prints {@link failureLine} for whatever a command threw.
 */
import { ApiError, errorMessage } from "@kvt/kube";

/** Where a request went and on whose behalf: what the user may have to fix. */
export interface ConnectionOrigin {
  /** The API server base URL. */
  readonly server: string;
  /** The kubeconfig files read, in order (empty: none, `--server` only). */
  readonly kubeconfigFiles: readonly string[];
  /** The context used, if any. */
  readonly context?: string;
}

/** What went wrong on the way to the server. */
export type ConnectionFailure = "refused" | "dns" | "tls" | "timeout" | "unreachable";

const CODES: ReadonlyArray<readonly [ConnectionFailure, ReadonlySet<string>]> = [
  ["refused", new Set(["ECONNREFUSED"])],
  ["dns", new Set(["ENOTFOUND", "EAI_AGAIN", "EAI_FAIL", "EAI_NONAME", "EAI_NODATA"])],
  ["timeout", new Set(["ETIMEDOUT", "UND_ERR_CONNECT_TIMEOUT"])],
  ["unreachable", new Set(["EHOSTUNREACH", "ENETUNREACH", "ECONNRESET", "EPIPE", "EADDRNOTAVAIL"])],
];

function errorCode(error: unknown): string | undefined {
  if (typeof error !== "object" || error === null) return undefined;
  const code = (error as { code?: unknown }).code;
  if (typeof code === "string") return code;
  // Node's happy-eyeballs connect fails with an AggregateError; its parts carry the codes.
  const first = (error as { errors?: unknown[] }).errors?.[0];
  return first === undefined ? undefined : errorCode(first);
}

function isTlsCode(code: string): boolean {
  return (
    code.startsWith("ERR_TLS_") ||
    code.startsWith("ERR_SSL_") ||
    code.startsWith("CERT_") ||
    code.startsWith("UNABLE_TO_") ||
    code.includes("SELF_SIGNED") ||
    code === "EPROTO" ||
    code === "HOSTNAME_MISMATCH"
  );
}

/** The kind of a Node socket/DNS/TLS error, or undefined when it is not one. */
export function classifyConnectionError(error: unknown): ConnectionFailure | undefined {
  const code = errorCode(error);
  if (!code) return undefined;
  if (isTlsCode(code)) return "tls";
  return CODES.find(([, codes]) => codes.has(code))?.[0];
}

/** `(kubeconfig FILES, context "NAME")`: the configuration the user would look at. */
export function describeOrigin(origin: ConnectionOrigin): string {
  const files = origin.kubeconfigFiles.length > 0 ? `kubeconfig ${origin.kubeconfigFiles.join(":")}` : "no kubeconfig";
  return `${files}, ${origin.context ? `context "${origin.context}"` : "no context"}`;
}

const NEXT_STEP: Readonly<Record<ConnectionFailure, string>> = {
  refused:
    "is the cluster up and listening there? If this is the wrong cluster, set KUBECONFIG or pass --kubeconfig/--context",
  dns: "check the server address in the kubeconfig (kubectl config view --minify) and this machine's DNS or VPN",
  tls: "check that the kubeconfig's certificate-authority(-data) is this cluster's CA and that the server's certificate names the address used; a kubeconfig from an older cluster has the old CA",
  timeout: "is the cluster up, and reachable from here (firewall, VPN, proxy)?",
  unreachable: "is the cluster up, and reachable from here (routes, firewall, VPN)?",
};

function what(kind: ConnectionFailure, origin: ConnectionOrigin, cause: unknown): string {
  // OpenSSL's messages span lines (`...:wrong version number:../deps/openssl/...\n`): keep one line.
  const raw = cause instanceof Error && cause.message ? cause.message : (errorCode(cause) ?? "");
  const detail = raw.replace(/\s+/g, " ").trim();
  const host = new URL(origin.server).hostname;
  switch (kind) {
    case "refused":
      return `the connection to the API server at ${origin.server} was refused`;
    case "dns":
      return `cannot resolve the API server's host "${host}" (${origin.server})`;
    case "tls":
      return `the TLS handshake with the API server at ${origin.server} failed: ${detail}`;
    case "timeout":
      return `the API server at ${origin.server} did not answer in time`;
    case "unreachable":
      return `cannot reach the API server at ${origin.server} (${errorCode(cause) ?? detail})`;
  }
}

/** The API server could not be reached, or TLS with it failed. `message` is the whole line for the user. */
export class ConnectionError extends Error {
  readonly kind: ConnectionFailure;
  readonly origin: ConnectionOrigin;
  /** Node's error code (`ECONNREFUSED`, `ENOTFOUND`, `SELF_SIGNED_CERT_IN_CHAIN`, ...). */
  readonly code: string | undefined;

  constructor(kind: ConnectionFailure, origin: ConnectionOrigin, cause: unknown) {
    super(`${what(kind, origin, cause)} (${describeOrigin(origin)}): ${NEXT_STEP[kind]}`, { cause });
    this.name = "ConnectionError";
    this.kind = kind;
    this.origin = origin;
    this.code = errorCode(cause);
  }
}

/** Wraps a Node socket/DNS/TLS error as a {@link ConnectionError}; other errors come back as they are. */
export function toConnectionError(error: Error, origin: ConnectionOrigin): Error {
  if (error instanceof ConnectionError) return error;
  const kind = classifyConnectionError(error);
  return kind ? new ConnectionError(kind, origin, error) : error;
}

/** What to check after a 401 or 403 from the server at `origin`; undefined for other codes. */
export function authHint(code: number, origin: ConnectionOrigin): string | undefined {
  const where = `server ${origin.server}, ${describeOrigin(origin)}`;
  if (code === 401)
    return `the API server did not accept the credentials (${where}): the token or client certificate is wrong or expired, or meant for another cluster; get fresh credentials or pick another context`;
  if (code === 403)
    return `the user has no permission for this (${where}): 'kubectl auth can-i --list' shows what it may do; ask for a RoleBinding or pick another context`;
  return undefined;
}

/**
 * The line to print for a command's failure: a connection problem found in its causes, else its message (an
 * API error's as client-go prints it), followed by what to check for a 401 or 403 from the server at `origin`.
 */
export function failureLine(error: unknown, origin?: ConnectionOrigin): string {
  const message = errorMessage(error);
  for (let e: unknown = error; e instanceof Error; e = e.cause) {
    if (e instanceof ConnectionError) return e.message;
    const hint = e instanceof ApiError && origin ? authHint(e.code, origin) : undefined;
    if (hint) return `${message}: ${hint}`;
  }
  return message;
}
