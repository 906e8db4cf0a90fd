/**
 * The pure C++ migration tests (no KVM): builds test/migration/ (unit + socketpair session tests under ASan/UBSan)
 * and fuzz/ (libFuzzer frame-parser target, or the g++ standalone mutation driver without clang), runs them, and
 * checks the C++ SHA-256/HMAC/CRC-32C against node:crypto and the golden frames against the committed file.
 */
import { execFileSync } from "node:child_process";
import { createHash, createHmac, randomBytes } from "node:crypto";
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";

const root = new URL("..", import.meta.url).pathname;
const unitBin = join(root, "build/migration-test/migration_tests");
const fuzzBin = join(root, "build/fuzz/frame_parser_fuzz");

function run(bin: string, args: string[]): string {
  return execFileSync(bin, args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], timeout: 120_000 });
}

beforeAll(() => {
  // Long bounds: on a loaded 2-CPU machine (CI beside other builds) the migration tests' build alone took over 300 s,
  // and the fuzz targets' over 600 s at load 13-16.
  execFileSync("make", ["-s", "-j2", "-C", join(root, "test/migration")], { stdio: "inherit", timeout: 1_200_000 });
  execFileSync("make", ["-s", "-j2", "-C", join(root, "fuzz"), "frame-parser"], {
    stdio: "inherit",
    timeout: 1_200_000,
  });
}, 2_400_000);

describe("migration stream (C++)", () => {
  it("passes every C++ unit and session case", () => {
    const out = run(unitBin, []);
    expect(out).toMatch(/\d+ cases, 0 failed/);
  });

  it("computes SHA-256 and HMAC-SHA-256 exactly as node:crypto does", () => {
    for (const len of [0, 1, 55, 56, 63, 64, 65, 200, 1000]) {
      const msg = randomBytes(len);
      const key = randomBytes(len % 130);
      expect(run(unitBin, ["--sha256", msg.toString("hex")]).trim()).toBe(
        createHash("sha256").update(msg).digest("hex"),
      );
      expect(run(unitBin, ["--hmac", key.toString("hex"), msg.toString("hex")]).trim()).toBe(
        createHmac("sha256", key).update(msg).digest("hex"),
      );
    }
  });

  it("emits the committed golden frames byte for byte", () => {
    const golden = readFileSync(join(root, "test/migration/golden-frames.txt"), "utf8");
    expect(run(unitBin, ["--golden"])).toBe(golden);
  });

  it("survives a short fuzzing run of the frame parser", () => {
    const corpus = mkdtempSync(join(tmpdir(), "kvt-mig-fuzz-"));
    try {
      cpSync(join(root, "build/fuzz/corpus"), corpus, { recursive: true });
      const out = execFileSync(
        fuzzBin,
        ["-max_total_time=8", "-runs=200000", "-rss_limit_mb=1024", `-artifact_prefix=${corpus}/`, corpus],
        { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], timeout: 120_000 },
      );
      expect(out + readdirSync(corpus).join(" ")).not.toMatch(/crash-|leak-|timeout-/);
    } finally {
      rmSync(corpus, { recursive: true, force: true });
    }
  }, 130_000);
});
