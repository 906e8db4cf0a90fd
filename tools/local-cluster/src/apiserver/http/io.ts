/** Request bodies and responses: JSON/YAML decoding with a size limit, JSON and Status replies. */
import type { IncomingMessage, ServerResponse } from "node:http";
import { parse as parseYaml } from "yaml";
import { ApiError, badRequest } from "../errors.ts";
import { decodeProtobuf } from "./protobuf.ts";

const MAX_BODY = 3 * 1024 * 1024;

/** Reads the whole body (413 over 3 MiB, like etcd's request limit). */
export function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (b: Buffer) => {
      size += b.length;
      if (size > MAX_BODY) {
        req.removeAllListeners("data");
        req.resume();
        reject(new ApiError(413, "RequestEntityTooLarge", "Request entity too large: limit is 3145728"));
        return;
      }
      chunks.push(b);
    });
    req.once("end", () => resolve(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)));
    req.once("error", reject);
  });
}

/** Decodes JSON, YAML (apply patches, yaml content types) or Kubernetes protobuf; 400 on malformed input. */
export function decode(body: Buffer, contentType: string): unknown {
  if (contentType.includes("protobuf")) return decodeProtobuf(body);
  if (contentType.includes("cbor"))
    throw new ApiError(
      415,
      "UnsupportedMediaType",
      "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml",
    );
  const text = body.toString("utf8");
  if (text.trim() === "") return undefined;
  try {
    if (contentType.includes("yaml")) return parseYaml(text) as unknown;
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw badRequest(`error decoding request body: ${err instanceof Error ? err.message : String(err)}`);
  }
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
  sendJson(res, err.code, err.toStatus());
}
