/**
 * Request bodies of virt-api's webhooks and subresources: at most {@link MAX_BODY_BYTES} (413, as kube-apiserver),
 * JSON nested at most {@link MAX_JSON_DEPTH} levels (400): the admitters, JSON.stringify and structuredClone recurse,
 * and a 10^5-deep value must be refused here rather than overflow the stack in them. Both checks are iterative.
 */
import type { IncomingMessage } from "node:http";
import { ApiError, badRequest, type Status } from "../kube/status.ts";

/** kube-apiserver's request body limit (3 MiB); nothing larger reaches virt-api through it. */
export const MAX_BODY_BYTES = 3 * 1024 * 1024;

/** The deepest nesting of arrays and objects a body may have (a VM manifest is far below it). */
export const MAX_JSON_DEPTH = 1000;

/** 413 RequestEntityTooLarge with kube-apiserver's message. */
export function bodyTooLarge(): Status {
  return {
    kind: "Status",
    apiVersion: "v1",
    metadata: {},
    status: "Failure",
    message: `Request entity too large: limit is ${MAX_BODY_BYTES}`,
    reason: "RequestEntityTooLarge",
    code: 413,
  };
}

/** True if `value` nests arrays/objects more than `max` levels deep. */
export function exceedsDepth(value: unknown, max: number = MAX_JSON_DEPTH): boolean {
  if (value === null || typeof value !== "object") return false;
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length > 0) {
    const [v, depth] = stack.pop() as [unknown, number];
    if (depth > max) return true;
    for (const c of Array.isArray(v) ? v : Object.values(v as Record<string, unknown>))
      if (c !== null && typeof c === "object") stack.push([c, depth + 1]);
  }
  return false;
}

/** Reads and parses a JSON body (undefined when empty); 413 over the size limit, 400 for bad or too deep JSON. */
export async function readJson(req: IncomingMessage): Promise<unknown> {
  if (Number(req.headers["content-length"] ?? "0") > MAX_BODY_BYTES) {
    req.resume();
    throw new ApiError(bodyTooLarge());
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) {
      req.resume();
      throw new ApiError(bodyTooLarge());
    }
    chunks.push(chunk as Buffer);
  }
  const text = Buffer.concat(chunks).toString("utf8").trim();
  if (text === "") return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text) as unknown;
  } catch (error) {
    throw new ApiError(badRequest(`Can not unmarshal Request body to struct, error: ${(error as Error).message}`));
  }
  if (exceedsDepth(value))
    throw new ApiError(
      badRequest(`Can not unmarshal Request body to struct, error: exceeded max depth of ${MAX_JSON_DEPTH}`),
    );
  return value;
}
