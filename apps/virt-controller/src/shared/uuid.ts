/** Name-based UUIDs (RFC 4122 version 5, SHA-1). */
import { createHash } from "node:crypto";

/** KubeVirt's namespace for firmware UUIDs (`pkg/virt-controller/watch/vm/firmware.go`). */
export const FIRMWARE_UUID_NAMESPACE = "6a1a24a1-4061-4607-8bf4-a3963d0c5895";

/** UUIDv5 of `name` in `namespace` (a UUID string). */
export function uuidV5(namespace: string, name: string): string {
  const ns = Buffer.from(namespace.replaceAll("-", ""), "hex");
  const hash = createHash("sha1").update(ns).update(name).digest();
  hash[6] = (hash[6] & 0x0f) | 0x50;
  hash[8] = (hash[8] & 0x3f) | 0x80;
  const h = hash.subarray(0, 16).toString("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}
