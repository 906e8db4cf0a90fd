/** Request bodies and responses: JSON/YAML decoding with a size limit, JSON and Status replies. */
import type { IncomingMessage, ServerResponse } from "node:http";
import { exceedsDepth, MAX_JSON_DEPTH, MAX_REQUEST_BODY_BYTES } from "@kvt/api";
import { parse as parseYaml } from "yaml";
import { ApiError, badRequest, statusError } from "../errors.ts";
import { decodeProtobuf } from "./protobuf.ts";

/** kube-apiserver's MaxRequestBodyBytes: twice etcd's 1.5 MiB request limit (JSON is larger than protobuf). */
export const MAX_BODY_BYTES = MAX_REQUEST_BODY_BYTES;

/** 413 RequestEntityTooLarge, kube-apiserver's answer to a body over {@link MAX_BODY_BYTES}. */
export function bodyTooLarge(): ApiError {
  return statusError(413, "RequestEntityTooLarge", `Request entity too large: limit is ${MAX_BODY_BYTES}`);
}

/**
 * Reads the whole body: 413 as soon as the declared Content-Length or the bytes received pass 3 MiB (the rest is
 * drained unread, so the connection stays usable and nothing is buffered).
 */
export function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers["content-length"] ?? "0");
    if (declared > MAX_BODY_BYTES) {
      req.resume();
      reject(bodyTooLarge());
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (b: Buffer) => {
      size += b.length;
      if (size > MAX_BODY_BYTES) {
        req.removeAllListeners("data");
        chunks.length = 0;
        req.resume();
        reject(bodyTooLarge());
        return;
      }
      chunks.push(b);
    });
    req.once("end", () => resolve(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)));
    req.once("error", reject);
  });
}

/** True if the `[`/`{` nesting of `text` outside quoted scalars passes `max` (a YAML or JSON flow value). */
export function flowDepthExceeds(text: string, max: number): boolean {
  let depth = 0;
  let quote = "";
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quote) {
      if (c === "\\" && quote === '"') i++;
      else if (c === quote) quote = "";
    } else if (c === '"' || c === "'") quote = c;
    else if (c === "[" || c === "{") {
      if (++depth > max) return true;
    } else if (c === "]" || c === "}") depth = Math.max(0, depth - 1);
  }
  return false;
}

/** 400 for a body nested deeper than {@link MAX_JSON_DEPTH}. */
export function tooDeep(): ApiError {
  return badRequest(`error decoding request body: exceeded max depth of ${MAX_JSON_DEPTH}`);
}

/**
 * Decodes JSON, YAML (apply patches, yaml content types) or Kubernetes protobuf; 400 on malformed input and on
 * values nested deeper than {@link MAX_JSON_DEPTH} (checked here, before any recursive code sees the value).
 * The Content-Type was already checked against what the verb accepts (content-type.ts).
 */
export function decode(body: Buffer, contentType: string): unknown {
  let value: unknown;
  try {
    if (contentType.includes("protobuf")) value = decodeProtobuf(body);
    else {
      const text = body.toString("utf8");
      if (text.trim() === "") return undefined;
      if (!contentType.includes("yaml")) value = JSON.parse(text) as unknown;
      else {
        // The YAML parser recurses on flow collections: count them first.
        if (flowDepthExceeds(text, MAX_JSON_DEPTH)) throw tooDeep();
        value = parseYaml(text) as unknown;
      }
    }
  } catch (err) {
    if (err instanceof ApiError) throw err;
    // A parser that recursed too deep (nested protobuf, YAML block nesting) is the same bad input as a deep value.
    if (err instanceof RangeError || (err instanceof Error && err.message.includes("Maximum call stack")))
      throw tooDeep();
    throw badRequest(`error decoding request body: ${err instanceof Error ? err.message : String(err)}`);
  }
  if (exceedsDepth(value)) throw tooDeep();
  return value;
}

/** The media type without parameters, lower-cased. */
export function mediaType(contentType: string | undefined): string {
  return (contentType ?? "").split(";")[0]?.trim().toLowerCase() ?? "";
}

/** Sends a JSON body (pre-serialized or an object). */
export function sendJson(
  res: ServerResponse,
  code: number,
  body: unknown,
  contentType = "application/json",
  warnings: readonly string[] = [],
): void {
  const text = typeof body === "string" ? body : JSON.stringify(body);
  const headers: Record<string, string | string[]> = {
    "Content-Type": contentType,
    "Content-Length": String(Buffer.byteLength(text)),
    "Cache-Control": "no-cache, private",
  };
  if (warnings.length) headers.Warning = warnings.map((w) => `299 - ${JSON.stringify(w)}`);
  res.writeHead(code, headers);
  res.end(text);
}

/** Sends an error as a Status. */
export function sendError(res: ServerResponse, err: ApiError): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  // kube-apiserver (responsewriters.ErrorNegotiated) turns details.retryAfterSeconds into a Retry-After header.
  const retryAfter = err.status.details?.retryAfterSeconds;
  if (retryAfter !== undefined && retryAfter > 0) res.setHeader("Retry-After", String(retryAfter));
  sendJson(res, err.code, err.status);
}
