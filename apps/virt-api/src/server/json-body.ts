/**
 * Request bodies of virt-api's webhooks and subresources: at most {@link MAX_REQUEST_BODY_BYTES} (413, as kube-apiserver),
 * JSON nested at most {@link MAX_JSON_DEPTH} levels (400): the admitters, JSON.stringify and structuredClone recurse,
 * and a 10^5-deep value must be refused here rather than overflow the stack in them. Both checks are iterative.
 */
import type { IncomingMessage } from "node:http";
import { exceedsDepth, MAX_JSON_DEPTH, MAX_REQUEST_BODY_BYTES } from "@kvt/api";
import { type ApiError, badRequest, statusError } from "@kvt/kube";

/**
 * The limit of an AdmissionReview body: it carries the object and the old object, each as large as the API server
 * accepts in a request, plus the envelope. Refusing less would fail the API server's webhook call (a 500 there) for
 * an object it was right to accept (found by the API fuzz lane: a 3 MiB apply answered "read ECONNRESET").
 */
export const MAX_ADMISSION_REVIEW_BYTES = 3 * MAX_REQUEST_BODY_BYTES;

/** 413 RequestEntityTooLarge with kube-apiserver's message. */
export function bodyTooLarge(limit = MAX_REQUEST_BODY_BYTES): ApiError {
  return statusError(413, "RequestEntityTooLarge", `Request entity too large: limit is ${limit}`);
}

/**
 * Reads and parses a JSON body (undefined when empty); 413 over `limit` bytes (default the API server's request
 * limit), 400 for bad or too deep JSON.
 */
export async function readJson(req: IncomingMessage, limit = MAX_REQUEST_BODY_BYTES): Promise<unknown> {
  if (Number(req.headers["content-length"] ?? "0") > limit) {
    req.resume();
    throw bodyTooLarge(limit);
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > limit) {
      req.resume();
      throw bodyTooLarge(limit);
    }
    chunks.push(chunk as Buffer);
  }
  const text = Buffer.concat(chunks).toString("utf8").trim();
  if (text === "") return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text) as unknown;
  } catch (error) {
    throw badRequest(`Can not unmarshal Request body to struct, error: ${(error as Error).message}`);
  }
  if (exceedsDepth(value))
    throw badRequest(`Can not unmarshal Request body to struct, error: exceeded max depth of ${MAX_JSON_DEPTH}`);
  return value;
}
