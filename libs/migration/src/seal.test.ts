import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { connect, createServer, type Socket } from "node:net";
import { describe, expect, it } from "vitest";
import {
  deriveSessionKeys,
  MAX_RECORD_PLAINTEXT,
  RecordOpener,
  RecordSealer,
  SealError,
  sealedDuplex,
} from "./seal.ts";

// The vector the C++ implementation prints (native/test/migration.test.ts checks that side against the same file).
const vector = new Map(
  readFileSync(new URL("../../../native/test/migration/sealed-vector.txt", import.meta.url), "utf8")
    .trim()
    .split("\n")
    .map((l) => l.split(" ") as [string, string]),
);
const keys = deriveSessionKeys("kvt-shared-vector", Buffer.alloc(32, 1), Buffer.alloc(32, 2));

describe("migration stream encryption (TypeScript vs the C++ shared vector)", () => {
  it("derives the same keys and seals the same records byte for byte", () => {
    expect(keys.sourceToTarget.key.toString("hex")).toBe(vector.get("s2t-key"));
    expect(keys.sourceToTarget.iv.toString("hex")).toBe(vector.get("s2t-iv"));
    expect(keys.targetToSource.key.toString("hex")).toBe(vector.get("t2s-key"));
    expect(keys.targetToSource.iv.toString("hex")).toBe(vector.get("t2s-iv"));
    const sealer = new RecordSealer(keys.sourceToTarget);
    const wire = Buffer.concat([sealer.seal(Buffer.from("kvt")), sealer.seal(Buffer.from("migration"))]);
    expect(wire.toString("hex")).toBe(vector.get("records"));
    const opened = new RecordOpener(keys.sourceToTarget).push(Buffer.from(vector.get("records") ?? "", "hex"));
    expect(Buffer.concat(opened).toString()).toBe("kvtmigration");
  });

  it("opens a large stream delivered in odd pieces and never shows plaintext on the wire", () => {
    const data = Buffer.alloc(200_000, "A");
    randomBytes(1000).copy(data, 5000);
    const wire = new RecordSealer(keys.sourceToTarget).seal(data);
    expect(wire.length).toBe(data.length + Math.ceil(data.length / MAX_RECORD_PLAINTEXT) * 22);
    expect(wire.includes(data.subarray(5000, 5032))).toBe(false);
    const opener = new RecordOpener(keys.sourceToTarget);
    const out: Buffer[] = [];
    for (let at = 0; at < wire.length; at += 777) out.push(...opener.push(wire.subarray(at, at + 777)));
    opener.end();
    expect(Buffer.concat(out).equals(data)).toBe(true);
  });

  it("refuses tampered, reordered, cut, foreign and plain input", () => {
    const wire = new RecordSealer(keys.sourceToTarget).seal(Buffer.alloc(40_000, "x"));
    const open = (w: Buffer): void => {
      const o = new RecordOpener(keys.sourceToTarget);
      o.push(w);
      o.end();
    };
    const flipped = Buffer.from(wire);
    flipped[100] = flipped[100] ^ 1;
    expect(() => open(flipped)).toThrow(/failed authentication/);
    const rec = MAX_RECORD_PLAINTEXT + 22;
    const swapped = Buffer.concat([wire.subarray(rec, 2 * rec), wire.subarray(0, rec), wire.subarray(2 * rec)]);
    expect(() => open(swapped)).toThrow(/failed authentication/);
    expect(() => open(wire.subarray(0, wire.length - 10))).toThrow(/middle of a record/);
    expect(() => new RecordOpener(keys.targetToSource).push(wire)).toThrow(SealError);
    expect(() => open(Buffer.alloc(200, 0x4b))).toThrow(/not a sealed record/);
  });

  it("carries a stream both ways over TCP and ends cleanly", async () => {
    const server = createServer();
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const port = (server.address() as { port: number }).port;
    const accepted = new Promise<Socket>((r) => server.once("connection", r));
    const client = connect(port, "127.0.0.1");
    const raw = await accepted;
    const seen: Buffer[] = [];
    raw.on("data", (c: Buffer) => seen.push(c));
    const src = sealedDuplex(client, keys.sourceToTarget, keys.targetToSource);
    const dst = sealedDuplex(raw, keys.targetToSource, keys.sourceToTarget);
    const payload = randomBytes(1 << 20);
    const received: Buffer[] = [];
    dst.on("data", (c: Buffer) => received.push(c));
    const dstEnded = new Promise<void>((r) => dst.on("end", r));
    const reply = new Promise<Buffer>((r) => src.once("data", r));
    src.end(payload);
    dst.write(Buffer.from("ack"));
    expect((await reply).toString()).toBe("ack");
    await dstEnded;
    expect(Buffer.concat(received).equals(payload)).toBe(true);
    expect(Buffer.concat(seen).includes(payload.subarray(0, 32))).toBe(false);
    dst.end();
    src.destroy();
    server.close();
  });
});
