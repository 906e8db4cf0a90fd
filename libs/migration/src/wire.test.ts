import { createHmac } from "node:crypto";
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { crc32c, decodeFrames } from "./wire.ts";

// The golden frames the C++ encoder must produce (native/test/migration.test.ts checks the C++ side).
const golden = new Map(
  readFileSync(new URL("../../../native/test/migration/golden-frames.txt", import.meta.url), "utf8")
    .trim()
    .split("\n")
    .map((l) => l.split(" ") as [string, string]),
);
const frame = (name: string): Uint8Array => Buffer.from(golden.get(name) ?? "", "hex");

describe("wire format (TypeScript decoder vs the C++ golden frames)", () => {
  it("computes the CRC-32C check value", () => {
    expect(crc32c(new TextEncoder().encode("123456789"))).toBe(0xe3069283);
  });

  it.each([
    ["hello", "Hello", 48],
    ["challenge", "Challenge", 72],
    ["auth", "Auth", 32],
    ["authOk", "AuthOk", 0],
    ["start", "Start", 24],
    ["zero", "Zero", 40],
    ["populate", "Populate", 40],
    ["diskZero", "DiskZero", 24],
    ["disk", "Disk", 28],
    ["diskDigest", "DiskDigest", 16],
    ["abandon", "Abandon", 20],
  ])("decodes the golden %s frame with a valid CRC", (name, command, length) => {
    const [f] = decodeFrames(frame(name));
    expect(f).toMatchObject({ command, length, flags: 1, crcOk: true });
  });

  it("detects a flipped bit", () => {
    const bytes = frame("start");
    bytes[20] = (bytes[20] ?? 0) ^ 1;
    expect(decodeFrames(bytes)[0]?.crcOk).toBe(false);
  });

  it("agrees with node:crypto on both handshake MACs (secret s3cret, nonces 0..31 and 32..63)", () => {
    const nonceS = Buffer.from(Array.from({ length: 32 }, (_, i) => i));
    const nonceT = Buffer.from(Array.from({ length: 32 }, (_, i) => 32 + i));
    const version = Buffer.from([2, 0]);
    const [challenge] = decodeFrames(frame("challenge"));
    const [auth] = decodeFrames(frame("auth"));
    const macT = createHmac("sha256", "s3cret")
      .update(Buffer.concat([Buffer.from("kvt-migration target"), version, nonceS, nonceT]))
      .digest();
    const macS = createHmac("sha256", "s3cret")
      .update(Buffer.concat([Buffer.from("kvt-migration source"), version, nonceT, nonceS]))
      .digest();
    expect(Buffer.from(challenge?.payload.subarray(40, 72) ?? []).equals(macT)).toBe(true);
    expect(Buffer.from(auth?.payload ?? []).equals(macS)).toBe(true);
  });

  it("decodes the golden Start frame's fields (version 2, 1 GiB, 4 KiB pages)", () => {
    const [f] = decodeFrames(frame("start"));
    const v = new DataView(f?.payload.buffer ?? new ArrayBuffer(0), f?.payload.byteOffset, 24);
    expect([v.getUint16(0, true), Number(v.getBigUint64(8, true)), v.getUint32(16, true)]).toEqual([2, 2 ** 30, 4096]);
  });

  it("decodes the golden Disk frame's extent (disk 1, offset 512, 4 bytes) and data", () => {
    const [f] = decodeFrames(frame("disk"));
    const v = new DataView(f?.payload.buffer ?? new ArrayBuffer(0), f?.payload.byteOffset, 28);
    expect([v.getUint32(0, true), Number(v.getBigUint64(8, true)), Number(v.getBigUint64(16, true))]).toEqual([
      1, 512, 4,
    ]);
    expect(Buffer.from(f?.payload.subarray(24) ?? []).toString("hex")).toBe("deadbeef");
  });

  it("rejects truncated input", () => {
    expect(() => decodeFrames(frame("hello").subarray(0, 30))).toThrow(RangeError);
  });
});
