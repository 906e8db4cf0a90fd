import { spawnSync } from "node:child_process";
import {
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  truncateSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DiskImageError, type DiskImageErrorCode, importDiskImage, probeDiskImage } from "./disk-image.ts";
import { ensureQemuUtils, qemuImg, qemuIo, seededRandom, writePatternRaw } from "./host-qemu-img.ts";

const MiB = 1024 * 1024;
let dir: string;
let n = 0;
const file = (name: string): string => join(dir, `${n++}-${name}`);

// A fresh machine installs qemu-utils with apt-get first: minutes, not the default hook timeout.
beforeAll(async () => {
  await ensureQemuUtils();
  dir = mkdtempSync(join(tmpdir(), "kvt-disk-image-"));
}, 600_000);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Imports `image` and checks it byte for byte against `qemu-img convert -O raw` of the same image. */
async function expectSameAsQemu(image: string): Promise<{ allocatedBytes: number; out: string }> {
  const reference = `${image}.qemu.raw`;
  const out = `${image}.ours.raw`;
  qemuImg("convert", "-O", "raw", image, reference);
  const result = await importDiskImage(image, out);
  const ours = readFileSync(out);
  const theirs = readFileSync(reference);
  expect(ours.length).toBe(theirs.length);
  expect(ours.equals(theirs)).toBe(true);
  expect(result.virtualSize).toBe(theirs.length);
  return { allocatedBytes: result.allocatedBytes, out };
}

/** The DiskImageError code `promise` rejects with (fails the test when it resolves or throws anything else). */
async function codeOf(promise: Promise<unknown>): Promise<DiskImageErrorCode> {
  const err: unknown = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(DiskImageError);
  return (err as DiskImageError).code;
}

function patternQcow2(name: string, sizeBytes: number, seed: number, ...options: string[]): string {
  const raw = file(`${name}.raw`);
  writePatternRaw(raw, sizeBytes, seed);
  const image = file(`${name}.qcow2`);
  qemuImg("convert", "-O", "qcow2", ...options, raw, image);
  return image;
}

describe("importDiskImage() matches qemu-img convert -O raw", () => {
  it.each([
    ["qcow2 v3", ["-o", "compat=1.1"]],
    ["qcow2 v2 (compat=0.10)", ["-o", "compat=0.10"]],
    ["compressed qcow2 (-c)", ["-c"]],
    ["512-byte clusters", ["-o", "cluster_size=512"]],
    ["2 MiB clusters", ["-o", "cluster_size=2M"]],
    ["compressed, 4 KiB clusters", ["-c", "-o", "cluster_size=4k"]],
  ])("reads a %s image", async (_name, options) => {
    const image = patternQcow2("img", 16 * MiB, 7, ...options);
    const { allocatedBytes } = await expectSameAsQemu(image);
    expect(allocatedBytes).toBeGreaterThan(0);
    expect(allocatedBytes).toBeLessThan(16 * MiB);
  });

  it("reads 512-byte clusters allocated every other sector (host-contiguous, guest-scattered)", async () => {
    const raw = file("alternate.raw");
    const data = Buffer.alloc(4 * MiB);
    for (let at = 0; at < data.length; at += 1024) data.fill(((at >> 10) % 251) | 1, at, at + 512);
    writeFileSync(raw, data);
    const image = file("alternate.qcow2");
    qemuImg("convert", "-O", "qcow2", "-o", "cluster_size=512", raw, image);
    await expectSameAsQemu(image);
  });

  it("reads a qcow2 whose virtual size is not a multiple of the cluster size", async () => {
    const image = file("odd.qcow2");
    qemuImg("create", "-q", "-f", "qcow2", image, `${10 * MiB + 512}`);
    qemuIo(image, "write -P 0x5a 0 64k", `write -P 0x6b ${10 * MiB - 512} 1k`);
    await expectSameAsQemu(image);
  });

  it("reads a qcow2 over a raw backing file, and zeros past a shorter backing file", async () => {
    const base = file("base.raw");
    writePatternRaw(base, 8 * MiB, 11, 0.8);
    const top = file("top.qcow2");
    qemuImg("create", "-q", "-f", "qcow2", "-b", base, "-F", "raw", top, `${12 * MiB}`);
    qemuIo(top, "write -P 0xab 1M 64k", "write -z 3M 128k", "write -P 0xcd 7M 2M", "write -P 0x11 11M 4k");
    // Relative name, as a containerDisk layout has it.
    qemuImg("rebase", "-u", "-b", base.slice(dir.length + 1), "-F", "raw", top);
    await expectSameAsQemu(top);
    expect(probeDiskImage(top)).toEqual({
      format: "qcow2",
      virtualSize: 12 * MiB,
      backing: base.slice(dir.length + 1),
    });
  });

  it("reads a three-file chain: qcow2 over compressed qcow2 over raw", async () => {
    const base = file("base.raw");
    writePatternRaw(base, 8 * MiB, 12, 0.6);
    const mid = file("mid.qcow2");
    qemuImg("create", "-q", "-f", "qcow2", "-b", base, "-F", "raw", mid);
    qemuIo(mid, "write -P 0x22 0 1M", "write -z 2M 1M");
    qemuImg("convert", "-c", "-O", "qcow2", "-B", base, "-F", "raw", mid, `${mid}.c`);
    qemuImg("rebase", "-u", "-b", base.slice(dir.length + 1), "-F", "raw", `${mid}.c`);
    const top = file("top.qcow2");
    qemuImg("create", "-q", "-f", "qcow2", "-b", `${mid}.c`, "-F", "qcow2", top);
    qemuImg("rebase", "-u", "-b", `${mid}.c`.slice(dir.length + 1), "-F", "qcow2", top);
    qemuIo(top, "write -P 0x33 512k 1M", "write -z 6M 64k");
    await expectSameAsQemu(top);
  });

  it("keeps zero clusters (qemu-io write -z) as zeros and holes", async () => {
    const image = patternQcow2("zero", 8 * MiB, 13);
    qemuIo(image, "write -P 0x77 0 8M", "write -z 1M 2M", "write -z -u 5M 1M");
    const { out } = await expectSameAsQemu(image);
    expect(statSync(out).blocks * 512).toBeLessThanOrEqual(5 * MiB + 64 * 1024);
  });

  it("copies a sparse raw image sparsely", async () => {
    const raw = file("sparse.raw");
    writePatternRaw(raw, 64 * MiB, 14, 0.05);
    const { allocatedBytes, out } = await expectSameAsQemu(raw);
    expect(allocatedBytes).toBeLessThan(5 * MiB);
    expect(statSync(out).blocks * 512).toBeLessThan(6 * MiB);
    expect(probeDiskImage(raw)).toEqual({ format: "raw", virtualSize: 64 * MiB });
  });

  it("streams an 8 GiB image with bounded memory (patterns checked with qemu-io)", async () => {
    const image = file("big.qcow2");
    qemuImg("create", "-q", "-f", "qcow2", image, "8G");
    qemuIo(image, "write -P 0xa1 0 1M", "write -P 0xb2 3G 64M", "write -P 0xc3 8191M 1M");
    const out = file("big.raw");
    let peakRss = 0;
    const rss0 = process.memoryUsage().rss;
    const result = await importDiskImage(image, out, {
      onProgress: () => {
        peakRss = Math.max(peakRss, process.memoryUsage().rss);
      },
    });
    expect(result).toMatchObject({ virtualSize: 8 * 1024 * MiB, allocatedBytes: 66 * MiB });
    expect(peakRss - rss0).toBeLessThan(64 * MiB);
    expect(statSync(out).blocks * 512).toBeLessThan(70 * MiB);
    const check = ["read -P 0xa1 0 1M", "read -P 0 1M 1M", "read -P 0xb2 3G 64M", "read -P 0xc3 8191M 1M"];
    const r = spawnSync("qemu-io", ["-f", "raw", ...check.flatMap((c) => ["-c", c]), out], { encoding: "utf8" });
    expect(r.stdout).not.toMatch(/fail|error/i);
    expect(r.status).toBe(0);
    expect(r.stdout.match(/read \d+\/\d+ bytes/g)).toHaveLength(4);
  });

  it("reports progress and ends at the virtual size", async () => {
    const image = patternQcow2("progress", 8 * MiB, 15);
    const seen: number[] = [];
    await importDiskImage(image, file("p.raw"), {
      progressIntervalBytes: 2 * MiB,
      onProgress: (p) => seen.push(p.doneBytes),
    });
    expect(seen.at(-1)).toBe(8 * MiB);
    expect(seen.length).toBeGreaterThanOrEqual(4);
  });
});

/** Writes `value` at `at` in a copy of `image` (u32 or u64 big-endian, or raw bytes), returns the copy. */
function mutated(image: string, at: number, value: number | bigint | Buffer): string {
  const buf = readFileSync(image);
  if (typeof value === "number") buf.writeUInt32BE(value, at);
  else if (typeof value === "bigint") buf.writeBigUInt64BE(value, at);
  else value.copy(buf, at);
  const copy = file("mutated.qcow2");
  writeFileSync(copy, buf);
  return copy;
}

describe("importDiskImage() refuses broken images with a typed error", () => {
  let good: string;
  let compressed: string;
  beforeAll(() => {
    good = patternQcow2("good", 4 * MiB, 21);
    compressed = patternQcow2("good-c", 4 * MiB, 22, "-c");
  });
  const l1Offset = (image: string): number => Number(readFileSync(image).readBigUInt64BE(40));

  it.each<[string, (image: string) => string, DiskImageErrorCode]>([
    ["version 4", (i) => mutated(i, 4, 4), "UNSUPPORTED_VERSION"],
    ["version 1", (i) => mutated(i, 4, 1), "UNSUPPORTED_VERSION"],
    ["cluster_bits 8", (i) => mutated(i, 20, 8), "BAD_HEADER"],
    ["cluster_bits 30", (i) => mutated(i, 20, 30), "BAD_HEADER"],
    ["AES encryption", (i) => mutated(i, 32, 1), "UNSUPPORTED_FEATURE"],
    ["external data file bit", (i) => mutated(i, 72, 4n), "UNSUPPORTED_FEATURE"],
    ["corrupt bit", (i) => mutated(i, 72, 2n), "UNSUPPORTED_FEATURE"],
    ["unknown incompatible bit", (i) => mutated(i, 72, 1n << 40n), "UNSUPPORTED_FEATURE"],
    ["virtual size not a multiple of 512", (i) => mutated(i, 24, 4n * BigInt(MiB) + 100n), "BAD_SIZE"],
    ["virtual size over the limit", (i) => mutated(i, 24, 1n << 50n), "TOO_LARGE"],
    ["L1 table too small for the size", (i) => mutated(i, 24, 1n << 33n), "BAD_HEADER"],
    ["header_length 60", (i) => mutated(i, 100, 60), "BAD_HEADER"],
    [
      "L1 table past EOF",
      (i) => mutated(i, 40, BigInt(statSync(i).size + 65536 - (statSync(i).size % 65536))),
      "PAST_EOF",
    ],
    ["L1 entry past EOF", (i) => mutated(i, l1Offset(i), (1n << 63n) | (1n << 40n)), "PAST_EOF"],
    ["L1 entry unaligned", (i) => mutated(i, l1Offset(i), (1n << 63n) | 0x30200n), "BAD_TABLE_ENTRY"],
    ["backing name too long", (i) => mutated(i, 8, Buffer.from([0, 0, 0, 0, 0, 0, 0, 200, 0, 0, 8, 0])), "BAD_HEADER"],
    ["truncated inside the header", (i) => truncated(i, 60), "TRUNCATED"],
    ["truncated before the L1 table", (i) => truncated(i, 4096), "PAST_EOF"],
    ["truncated inside the data", (i) => truncated(i, statSync(i).size - 100_000), "TRUNCATED"],
  ])("%s", async (_name, make, code) => {
    expect(await codeOf(importDiskImage(make(good), file("out.raw")))).toBe(code);
  });

  it("refuses a compressed cluster that does not inflate", async () => {
    const buf = readFileSync(compressed);
    const middle = Math.floor(buf.length / 2);
    buf.fill(0xff, middle, middle + 65536);
    const bad = file("bad-deflate.qcow2");
    writeFileSync(bad, buf);
    expect(await codeOf(importDiskImage(bad, file("out.raw")))).toBe("BAD_COMPRESSED_CLUSTER");
  });

  it("refuses bad magic in a file declared qcow2, and names the file (undeclared, it is raw)", async () => {
    const notQcow2 = mutated(good, 0, 0x514649fc);
    expect(await codeOf(importDiskImage(notQcow2, file("out.raw"), { format: "qcow2" }))).toBe("BAD_MAGIC");
    expect(probeDiskImage(notQcow2).format).toBe("raw");
    const raw = file("declared.raw");
    writePatternRaw(raw, MiB, 23);
    const err = await importDiskImage(raw, file("out.raw"), { format: "qcow2" }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: "BAD_MAGIC", path: raw });
    expect(String(err)).toContain(raw);
  });

  it("refuses a raw image whose size is not a multiple of 512, and a vmdk", async () => {
    const raw = file("odd.raw");
    writeFileSync(raw, Buffer.alloc(1000, 1));
    expect(await codeOf(importDiskImage(raw, file("out.raw")))).toBe("BAD_SIZE");
    const vmdk = file("disk.vmdk");
    qemuImg("create", "-q", "-f", "vmdk", vmdk, "1M");
    expect(() => probeDiskImage(vmdk)).toThrow(expect.objectContaining({ code: "UNSUPPORTED_FORMAT" }));
  });

  it("stops with ABORTED when the signal fires, and leaves no destination", async () => {
    const out = file("aborted.raw");
    const controller = new AbortController();
    const importing = importDiskImage(good, out, { signal: controller.signal, progressIntervalBytes: 2 * MiB });
    controller.abort();
    expect(await codeOf(importing)).toBe("ABORTED");
    expect(() => statSync(out)).toThrow();
  });

  it("refuses a FIFO, a directory and a missing file without waiting", async () => {
    const fifo = file("fifo.img");
    expect(spawnSync("mkfifo", [fifo]).status).toBe(0);
    expect(await codeOf(importDiskImage(fifo, file("out.raw")))).toBe("NOT_A_FILE");
    expect(() => probeDiskImage(fifo)).toThrow(expect.objectContaining({ code: "NOT_A_FILE" }));
    expect(await codeOf(importDiskImage(dir, file("out.raw")))).toBe("NOT_A_FILE");
    expect(await codeOf(importDiskImage(file("absent.img"), file("out.raw")))).toBe("IO_ERROR");
  });

  it("removes the partial destination when it fails", async () => {
    const out = file("partial.raw");
    await codeOf(importDiskImage(truncated(good, statSync(good).size - 100_000), out));
    expect(() => statSync(out)).toThrow();
  });
});

function truncated(image: string, size: number): string {
  const copy = file("truncated.qcow2");
  writeFileSync(copy, readFileSync(image));
  truncateSync(copy, size);
  return copy;
}

describe("importDiskImage() judges the backing chain", () => {
  function overlay(path: string, backing: string, format = "qcow2"): string {
    qemuImg("create", "-q", "-f", "qcow2", "-u", "-b", backing, "-F", format, path, "4M");
    return path;
  }

  it("refuses a loop (a -> b -> a) and a self loop", async () => {
    const sub = join(dir, `loop-${n++}`);
    mkdirSync(sub);
    overlay(join(sub, "a.qcow2"), "b.qcow2");
    overlay(join(sub, "b.qcow2"), "a.qcow2");
    overlay(join(sub, "self.qcow2"), "self.qcow2");
    expect(await codeOf(importDiskImage(join(sub, "a.qcow2"), file("out.raw")))).toBe("BACKING_LOOP");
    expect(await codeOf(importDiskImage(join(sub, "self.qcow2"), file("out.raw")))).toBe("BACKING_LOOP");
  });

  it("refuses .. leaving the allowed dir, absolute paths, protocols and symlinks out", async () => {
    const sub = join(dir, `escape-${n++}`);
    mkdirSync(sub);
    const outside = file("outside.raw");
    writePatternRaw(outside, 4 * MiB, 31);
    overlay(join(sub, "dotdot.qcow2"), `../${outside.slice(dir.length + 1)}`, "raw");
    overlay(join(sub, "absolute.qcow2"), outside, "raw");
    overlay(join(sub, "proto.qcow2"), "nbd:localhost:10809", "raw");
    symlinkSync(outside, join(sub, "link.raw"));
    overlay(join(sub, "symlink.qcow2"), "link.raw", "raw");
    for (const name of ["dotdot", "absolute", "proto", "symlink"]) {
      const err = await importDiskImage(join(sub, `${name}.qcow2`), file("out.raw")).catch((e: unknown) => e);
      expect(err, name).toMatchObject({ code: "BACKING_PATH_REFUSED", path: join(sub, `${name}.qcow2`) });
    }
    // The same .. is fine when the caller allows the parent directory.
    const ok = await importDiskImage(join(sub, "dotdot.qcow2"), file("out.raw"), { allowedDir: dir });
    expect(ok.virtualSize).toBe(4 * MiB);
  });

  it("refuses a chain deeper than maxChainDepth, a vmdk backing format and a missing backing file", async () => {
    const sub = join(dir, `deep-${n++}`);
    mkdirSync(sub);
    writePatternRaw(join(sub, "0.raw"), 4 * MiB, 32);
    overlay(join(sub, "1.qcow2"), "0.raw", "raw");
    overlay(join(sub, "2.qcow2"), "1.qcow2");
    overlay(join(sub, "3.qcow2"), "2.qcow2");
    expect(await codeOf(importDiskImage(join(sub, "3.qcow2"), file("o.raw"), { maxChainDepth: 2 }))).toBe(
      "BACKING_TOO_DEEP",
    );
    expect((await importDiskImage(join(sub, "3.qcow2"), file("o.raw"), { maxChainDepth: 3 })).format).toBe("qcow2");
    overlay(join(sub, "vmdk-backed.qcow2"), "0.raw", "vmdk");
    expect(await codeOf(importDiskImage(join(sub, "vmdk-backed.qcow2"), file("o.raw")))).toBe("UNSUPPORTED_FORMAT");
    overlay(join(sub, "missing.qcow2"), "nope.qcow2");
    expect(await codeOf(importDiskImage(join(sub, "missing.qcow2"), file("o.raw")))).toBe("IO_ERROR");
  });

  it("never writes the source: a destination in the chain is refused", async () => {
    const image = patternQcow2("src", 4 * MiB, 33);
    const before = readFileSync(image);
    expect(await codeOf(importDiskImage(image, image))).toBe("DESTINATION_IN_CHAIN");
    expect(readFileSync(image).equals(before)).toBe(true);
  });
});

describe("importDiskImage() under header and table mutations (seeded fuzz)", () => {
  it("either imports or throws DiskImageError, never anything else and never hangs", async () => {
    const images = [patternQcow2("fuzz", 2 * MiB, 41), patternQcow2("fuzz-c", 2 * MiB, 42, "-c")];
    const random = seededRandom(0x9e3779b9);
    const outcomes = new Map<string, number>();
    for (let i = 0; i < 300; i++) {
      const source = readFileSync(images[i % 2]);
      // A third of the mutations in the header, a third in the L1 table, a third in the first L2 table.
      const l1 = Number(source.readBigUInt64BE(40));
      const l2 = Number(source.readBigUInt64BE(l1) & 0x00fffffffffffe00n);
      const regions = [
        [0, 112],
        [l1, 64],
        [l2, 512],
      ];
      for (let k = 1 + Math.floor(random() * 4); k > 0; k--) {
        const [start, length] = regions[Math.floor(random() * 3)];
        source[start + Math.floor(random() * length)] = Math.floor(random() * 256);
      }
      const image = join(dir, "fuzz-case.qcow2");
      writeFileSync(image, source);
      const outcome = await importDiskImage(image, join(dir, "fuzz-out.raw"), { maxVirtualBytes: 64 * MiB }).then(
        () => "ok",
        (e: unknown) => {
          if (!(e instanceof DiskImageError)) throw new Error(`case ${i}: not a DiskImageError`, { cause: e });
          return e.code;
        },
      );
      outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
    }
    if (process.env.FUZZ_REPORT) console.log(JSON.stringify(Object.fromEntries(outcomes)));
    expect([...outcomes.keys()].length).toBeGreaterThan(3);
  }, 120_000);
});
