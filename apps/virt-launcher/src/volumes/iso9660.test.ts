import { createHash } from "node:crypto";
import { statSync, writeFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { IsoImageError } from "./errors.ts";
import { isoinfoExtract, isoinfoPaths, readMounted, runTool } from "./host-iso-tools.ts";
import { isoScratch } from "./iso-scratch.ts";
import { type IsoFileInput, type IsoImageOptions, writeIso9660 } from "./iso9660.ts";

const timestamp = new Date("2026-01-02T03:04:05Z");
const sha256 = (b: Buffer): string => createHash("sha256").update(b).digest("hex");
const LONG_NAME = `${"n".repeat(200)}-${"x".repeat(52)}`; // 253 bytes: the longest name Linux returns whole

const sample: IsoFileInput[] = [
  { path: "user-data", data: "#cloud-config\npassword: secret\n" },
  { path: "meta-data", data: '{"instance-id":"x"}' },
  { path: "network-config", data: "version: 2\n" },
  { path: "openstack/latest/meta_data.json", data: "{}", mode: 0o600 },
  { path: "empty", data: "" },
  { path: "Mixed.Case.name.TXT", data: "case" },
  { path: "spaces and ünïcödé ☃.conf", data: "odd" },
  { path: "semi;colon*star?.txt", data: "joliet-forbidden characters" },
  { path: ".hidden", data: "dot" },
  { path: LONG_NAME, data: "long" },
  { path: "bin.dat", data: Uint8Array.from({ length: 5000 }, (_, i) => (i * 7) % 256) },
];

const scratch = isoScratch();
function expectedBytes(f: IsoFileInput): Buffer {
  return typeof f.data === "string" ? Buffer.from(f.data) : Buffer.from(f.data);
}

function refusal(options: Partial<IsoImageOptions>): IsoImageError {
  try {
    writeIso9660({ volumeId: "cfgdata", files: [], timestamp, ...options });
  } catch (err) {
    expect(err).toBeInstanceOf(IsoImageError);
    return err as IsoImageError;
  }
  throw new Error("writeIso9660 accepted the input");
}

describe("writeIso9660() output", () => {
  it("is the same bytes for the same input, whatever the file order", () => {
    const a = writeIso9660({ volumeId: "cidata", files: sample, timestamp });
    const b = writeIso9660({ volumeId: "cidata", files: [...sample].reverse(), timestamp });
    expect(sha256(a)).toBe(sha256(b));
    const later = writeIso9660({ volumeId: "cidata", files: sample, timestamp: new Date("2026-01-02T03:04:06Z") });
    expect(sha256(later)).not.toBe(sha256(a));
  });

  it("is padded to 1 MiB as xorrisofs -partition_cyl_align on pads, or to the given alignment", () => {
    const image = writeIso9660({ volumeId: "cidata", files: sample, timestamp });
    expect(image.length).toBe(1024 * 1024);
    const small = writeIso9660({ volumeId: "cidata", files: sample, timestamp, alignBytes: 2048 });
    expect(small.length % 2048).toBe(0);
    expect(small.length).toBeLessThan(image.length);
    // The volume space size (PVD offset 80, both-endian) covers the padding, as xorriso's does.
    expect(image.readUInt32LE(16 * 2048 + 80) * 2048).toBe(image.length);
    expect(image.readUInt32BE(16 * 2048 + 84) * 2048).toBe(image.length);
  });

  it("carries the volume label blkid reports", () => {
    const { file } = scratch(writeIso9660({ volumeId: "config-2", files: sample, timestamp }));
    const out = runTool("blkid", ["-p", "-o", "export", file]);
    expect(out).toContain("LABEL=config-2\n");
    expect(out).toContain("TYPE=iso9660\n");
  });

  it("reads back through isoinfo: Rock Ridge names, Joliet names, primary 8.3 names, and contents", () => {
    const { file } = scratch(writeIso9660({ volumeId: "cidata", files: sample, timestamp }));
    const info = runTool("isoinfo", ["-d", "-i", file]);
    expect(info).toMatch(/Volume id: cidata\n/);
    expect(info).toContain("Rock Ridge signatures version 1 found");
    expect(info).toContain("Joliet with UCS level 3 found");

    const rr = isoinfoPaths(file, "-R");
    expect(rr.sort()).toEqual([...sample.map((f) => f.path), "openstack", "openstack/latest"].sort());
    for (const f of sample) expect(isoinfoExtract(file, f.path).equals(expectedBytes(f)), f.path).toBe(true);

    // Joliet: names kept up to 64 characters (";1" on files); forbidden characters become "_".
    const joliet = isoinfoPaths(file, "-J");
    expect(joliet).toContain("user-data;1");
    expect(joliet).toContain("openstack/latest/meta_data.json;1");
    expect(joliet).toContain("spaces and ünïcödé _.conf;1"); // isoinfo prints Latin-1: the snowman shows as "_"
    expect(joliet).toContain("semi_colon_star_.txt;1");
    expect(joliet.find((p) => p.startsWith("nnn"))).toBe(`${"n".repeat(62)};1`);

    // Primary tree: unique level-1 identifiers.
    const primary = runTool("isoinfo", ["-f", "-i", file]).trim().split("\n");
    expect(primary).toContain("/USER_DAT.;1");
    expect(new Set(primary).size).toBe(primary.length);
    for (const p of primary) expect(p).toMatch(/^(\/[A-Z0-9_]{1,8}(\.[A-Z0-9_]{0,3};1)?)+$/);
  });

  it("matches what KubeVirt's xorrisofs makes from the same files: size, label, names and bytes", () => {
    const files = sample.filter((f) => !f.path.includes("/"));
    const { file, dir } = scratch(writeIso9660({ volumeId: "cidata", files, timestamp }));
    const grafts = files.map((f, i) => {
      const src = `${dir}/src${i}`;
      writeFileSync(src, expectedBytes(f));
      return `${f.path.replace(/[=\\]/g, "\\$&")}=${src}`;
    });
    const theirs = `${dir}/xorrisofs.iso`;
    const args = [
      "-output",
      theirs,
      "-volid",
      "cidata",
      "-joliet",
      "-rock",
      "-graft-points",
      "-partition_cyl_align",
      "on",
    ];
    runTool("sh", ["-c", `xorrisofs "$@" 2>/dev/null`, "xorrisofs", ...args, ...grafts]);
    expect(statSync(file).size).toBe(statSync(theirs).size);
    expect(isoinfoPaths(file, "-R").sort()).toEqual(isoinfoPaths(theirs, "-R").sort());
    for (const f of files)
      expect(isoinfoExtract(file, f.path).equals(isoinfoExtract(theirs, f.path)), f.path).toBe(true);
  });

  it("reads back through xorriso with no warning, Rock Ridge modes included", () => {
    const { file } = scratch(writeIso9660({ volumeId: "cidata", files: sample, timestamp, fileMode: 0o640 }));
    const r = runTool("sh", ["-c", `xorriso -report_about WARNING -indev '${file}' -find / -exec lsdl -- 2>&1`]);
    expect(r).not.toMatch(/WARNING|SORRY|FAILURE|FATAL/);
    expect(r).toMatch(/-rw-------\s+1 0\s+0\s+2 Jan {2}2 {2}2026 '\/openstack\/latest\/meta_data.json'/);
    expect(r).toMatch(/-rw-r-----\s+1 0\s+0\s+31 Jan {2}2 {2}2026 '\/user-data'/);
    expect(r).toMatch(/drwxr-xr-x\s+1 0\s+0\s+0 Jan {2}2 {2}2026 '\/openstack'/);
  });

  it("reads back through libarchive (bsdtar) byte for byte", () => {
    const { file, dir } = scratch(writeIso9660({ volumeId: "cidata", files: sample, timestamp }));
    runTool("sh", ["-c", `mkdir -p '${dir}/x' && bsdtar -xf '${file}' -C '${dir}/x'`]);
    const listed = runTool("bsdtar", ["-tf", file]).trim().split("\n");
    for (const f of sample) expect(listed).toContain(f.path);
  });

  it("mounts read-only and shows every file with its exact name, mode and bytes", (ctx) => {
    const { file, dir } = scratch(writeIso9660({ volumeId: "cidata", files: sample, timestamp }));
    const tree = readMounted(file, dir);
    if (typeof tree === "string") {
      ctx.skip(`cannot mount an ISO image here (${tree}); isoinfo, xorriso and bsdtar still checked it`);
      return;
    }
    expect([...tree.directories].sort()).toEqual(["openstack", "openstack/latest"]);
    expect([...tree.files.keys()].sort()).toEqual(sample.map((f) => f.path).sort());
    for (const f of sample) {
      const got = tree.files.get(f.path)!;
      expect(got.content.equals(expectedBytes(f)), `${tree.how}: ${f.path}`).toBe(true);
      expect(got.mode & 0o7777, `${tree.how}: mode of ${f.path}`).toBe(f.mode ?? 0o644);
    }
  });

  it("holds many keys and long names: directories over many blocks, names in continuation areas", (ctx) => {
    const files: IsoFileInput[] = Array.from({ length: 1500 }, (_, i) => ({
      path: `${String(i).padStart(4, "0")}-${"k".repeat(240)}`,
      data: `value ${i}\n`,
    }));
    const image = writeIso9660({ volumeId: "cfgdata", files, timestamp });
    const { file, dir } = scratch(image);
    expect(isoinfoPaths(file, "-R").sort()).toEqual(files.map((f) => f.path).sort());
    expect(isoinfoExtract(file, files[1234].path).toString()).toBe("value 1234\n");
    const tree = readMounted(file, dir);
    if (typeof tree === "string") {
      ctx.skip(`cannot mount an ISO image here (${tree})`);
      return;
    }
    expect(tree.files.size).toBe(1500);
    expect(tree.files.get(files[1499].path)?.content.toString()).toBe("value 1499\n");
  });

  it("writes an image with no files that readers accept", () => {
    const { file } = scratch(writeIso9660({ volumeId: "cfgdata", files: [], timestamp }));
    expect(isoinfoPaths(file, "-R")).toEqual([]);
  });

  it("keeps a large file whole (5 MiB, not a multiple of a block)", () => {
    const data = Buffer.alloc(5 * 1024 * 1024 + 123);
    for (let i = 0; i < data.length; i += 4093) data[i] = i % 251;
    const { file } = scratch(writeIso9660({ volumeId: "cfgdata", files: [{ path: "big", data }], timestamp }));
    expect(sha256(isoinfoExtract(file, "big"))).toBe(sha256(data));
  });
});

describe("writeIso9660() refusals", () => {
  it.each([
    ["an empty volume id", { volumeId: "" }, "INVALID_VOLUME_ID"],
    ["a 33-character volume id", { volumeId: "x".repeat(33) }, "INVALID_VOLUME_ID"],
    ["a non-ASCII volume id", { volumeId: "données" }, "INVALID_VOLUME_ID"],
    ["an empty path component", { files: [{ path: "a//b", data: "" }] }, "INVALID_NAME"],
    ["a leading slash", { files: [{ path: "/etc", data: "" }] }, "INVALID_NAME"],
    ["a '..' component", { files: [{ path: "../escape", data: "" }] }, "INVALID_NAME"],
    ["a '.' name", { files: [{ path: ".", data: "" }] }, "INVALID_NAME"],
    ["a NUL in a name", { files: [{ path: "a\u0000b", data: "" }] }, "INVALID_NAME"],
    ["a newline in a name", { files: [{ path: "a\nb", data: "" }] }, "INVALID_NAME"],
    ["a lone surrogate", { files: [{ path: "a\ud800", data: "" }] }, "INVALID_NAME"],
    ["a 254-byte name", { files: [{ path: "é".repeat(127), data: "" }] }, "NAME_TOO_LONG"],
    ["a path 9 levels deep", { files: [{ path: "1/2/3/4/5/6/7/8/f", data: "" }] }, "PATH_TOO_DEEP"],
    [
      "the same path twice",
      {
        files: [
          { path: "a", data: "1" },
          { path: "a", data: "2" },
        ],
      },
      "DUPLICATE_PATH",
    ],
    [
      "a file under a file",
      {
        files: [
          { path: "a", data: "" },
          { path: "a/b", data: "" },
        ],
      },
      "PATH_CONFLICT",
    ],
    [
      "a file where a directory is",
      {
        files: [
          { path: "a/b", data: "" },
          { path: "a", data: "" },
        ],
      },
      "PATH_CONFLICT",
    ],
    ["a mode over 0o7777", { files: [{ path: "a", data: "", mode: 0o10000 }] }, "INVALID_OPTION"],
    ["an alignment not a multiple of 2048", { alignBytes: 1000 }, "INVALID_OPTION"],
    ["a date before 1900", { timestamp: new Date("1899-12-31T00:00:00Z") }, "INVALID_OPTION"],
    ["an invalid date", { timestamp: new Date("nope") }, "INVALID_OPTION"],
  ] as const)("refuses %s", (_what, options, code) => {
    expect(refusal(options as Partial<IsoImageOptions>).code).toBe(code);
  });

  it("refuses more files than the limit, counting directories", () => {
    const files = Array.from({ length: 4097 }, (_, i) => ({ path: `k${i}`, data: "" }));
    expect(refusal({ files }).code).toBe("TOO_MANY_FILES");
    expect(refusal({ files: [{ path: "d/a", data: "" }], limits: { maxFiles: 1 } }).code).toBe("TOO_MANY_FILES");
  });

  it("refuses a value larger than the image limit before allocating the image", () => {
    const big = Buffer.alloc(3 * 1024 * 1024);
    const err = refusal({ files: [{ path: "huge", data: big }], limits: { maxImageBytes: 2 * 1024 * 1024 } });
    expect(err.code).toBe("IMAGE_TOO_LARGE");
    expect(err.path).toBe("huge");
    const many = Array.from({ length: 3 }, (_, i) => ({ path: `p${i}`, data: Buffer.alloc(900 * 1024) }));
    expect(refusal({ files: many, limits: { maxImageBytes: 2 * 1024 * 1024 } }).code).toBe("IMAGE_TOO_LARGE");
  });
});

describe("writeIso9660() golden bytes", () => {
  it("writes the pinned image for a fixed NoCloud input (update the hash only for an intended layout change)", () => {
    const image = writeIso9660({
      volumeId: "cidata",
      timestamp,
      files: [
        { path: "user-data", data: "#cloud-config\n", mode: 0o600 },
        { path: "meta-data", data: '{"instance-id":"i-1"}', mode: 0o600 },
      ],
    });
    expect(sha256(image)).toBe("2888af4fdcf33936dd40c5c2c4736dffdc0d14c0a95a8743f5c1ac8fe00be1c6");
  });
});
