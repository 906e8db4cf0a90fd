/**
 * The virtio fuzz targets, built by fuzz/Makefile with libFuzzer under clang or the g++ + ASan/UBSan standalone
 * mutation driver otherwise, each run briefly from its seed corpus: fuzz/virtqueue_fuzz.cc (the split-queue chain
 * walker, the virtio-blk request parser and the virtio-net frame code over an arbitrary guest) and fuzz/virtio_pci_fuzz.cc (register
 * sequences against the virtio-pci transport, with a synchronous virtio-blk on a memfd disk and save/restore), and the
 * same with an inline virtio-net over a socket pair whose peer sends frames of fuzzed lengths (virtio_net_pci_fuzz).
 * The C++ unit tests of the same code (test/virtio_*_test.cc) run in unit.test.ts.
 */
import { execFileSync } from "node:child_process";
import { cpSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";

const root = new URL("..", import.meta.url).pathname;
const fuzzDir = join(root, "build/fuzz");

// Runs one fuzz target from a copy of its seed corpus for at most `seconds`; fails on any crash/leak/timeout.
function fuzzBriefly(target: string, corpusName: string, seconds: number): void {
  const corpus = mkdtempSync(join(tmpdir(), `kvt-${target}-`));
  try {
    cpSync(join(fuzzDir, corpusName), corpus, { recursive: true });
    const out = execFileSync(
      join(fuzzDir, target),
      [
        `-max_total_time=${seconds}`,
        "-runs=100000",
        "-rss_limit_mb=1024",
        "-timeout=5",
        `-artifact_prefix=${corpus}/`,
        corpus,
      ],
      { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], timeout: 120_000 },
    );
    expect(out + readdirSync(corpus).join(" ")).not.toMatch(/crash-|leak-|timeout-/);
  } finally {
    rmSync(corpus, { recursive: true, force: true });
  }
}

beforeAll(() => {
  execFileSync("make", ["-s", "-j2", "-C", join(root, "fuzz"), "virtqueue"], { stdio: "inherit", timeout: 300_000 });
}, 600_000);

describe("virtio fuzz targets (C++)", () => {
  it("survive a short run of the chain walker, the blk request parser and the net frame code", () => {
    fuzzBriefly("virtqueue_fuzz", "virtqueue-corpus", 8);
  }, 130_000);

  it("survive a short run of register sequences against the virtio-pci transport and virtio-blk", () => {
    fuzzBriefly("virtio_pci_fuzz", "virtio-pci-corpus", 8);
  }, 130_000);

  it("survive a short run of register sequences and peer frames against the transport and virtio-net", () => {
    fuzzBriefly("virtio_net_pci_fuzz", "virtio-net-pci-corpus", 8);
  }, 130_000);
});
