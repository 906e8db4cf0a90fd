/**
 * The virtio queue fuzz target (fuzz/virtqueue_fuzz.cc: the split-queue chain walker and the virtio-blk request
 * parser over an arbitrary guest), built by fuzz/Makefile with libFuzzer under clang or the g++ + ASan/UBSan
 * standalone mutation driver otherwise, run briefly from its seed corpus. The C++ unit tests of the same code
 * (test/virtio_*_test.cc) run in unit.test.ts.
 */
import { execFileSync } from "node:child_process";
import { cpSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";

const root = new URL("..", import.meta.url).pathname;
const fuzzBin = join(root, "build/fuzz/virtqueue_fuzz");

beforeAll(() => {
  execFileSync("make", ["-s", "-C", join(root, "fuzz"), "virtqueue"], { stdio: "inherit", timeout: 300_000 });
}, 600_000);

describe("virtqueue parser (C++)", () => {
  it("survives a short fuzzing run of the chain walker and the blk request parser", () => {
    const corpus = mkdtempSync(join(tmpdir(), "kvt-vq-fuzz-"));
    try {
      cpSync(join(root, "build/fuzz/virtqueue-corpus"), corpus, { recursive: true });
      const out = execFileSync(
        fuzzBin,
        ["-max_total_time=8", "-runs=100000", "-rss_limit_mb=1024", "-timeout=5", `-artifact_prefix=${corpus}/`, corpus],
        { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], timeout: 120_000 },
      );
      expect(out + readdirSync(corpus).join(" ")).not.toMatch(/crash-|leak-|timeout-/);
    } finally {
      rmSync(corpus, { recursive: true, force: true });
    }
  }, 130_000);
});
