import { describe, expect, it } from "vitest";
import { type BuildStamp, parseStamp, staleReason } from "./stamp.ts";

const WANT = { kubernetes: "v1.37.2", etcd: "v3.7.3", containerd: "v2.4.2", go: "go1.26.8" };
const STAMP: BuildStamp = { ...WANT, seconds: { kubernetes: 1800, etcd: 200 }, sizes: { etcd: 1 }, builtAt: "x" };
const BINARIES = ["kube-apiserver", "etcd"];

describe("staleReason", () => {
  it("is undefined when versions, go and every binary match", () => {
    expect(staleReason(STAMP, WANT, BINARIES, () => true)).toBeUndefined();
  });

  it("names the first thing that changed", () => {
    expect(staleReason(undefined, WANT, BINARIES, () => true)).toBe("no build yet");
    expect(staleReason({ ...STAMP, kubernetes: "v1.36.3" }, WANT, BINARIES, () => true)).toBe(
      "kubernetes changed: v1.36.3 -> v1.37.2",
    );
    expect(staleReason({ ...STAMP, etcd: "v3.6.16" }, WANT, BINARIES, () => true)).toMatch(/^etcd changed/);
    expect(staleReason({ ...STAMP, containerd: "v2.3.7" }, WANT, BINARIES, () => true)).toMatch(/^containerd changed/);
    expect(staleReason({ ...STAMP, go: "go1.26.7" }, WANT, BINARIES, () => true)).toMatch(/^go changed/);
  });

  it("rebuilds when a binary is gone", () => {
    expect(staleReason(STAMP, WANT, BINARIES, (b) => b !== "etcd")).toBe("missing binaries: etcd");
  });
});

describe("parseStamp", () => {
  it("round-trips a stamp", () => {
    expect(parseStamp(JSON.stringify(STAMP))).toEqual(STAMP);
  });

  it("treats a half-written or foreign file as no stamp", () => {
    // A stamp from before containerd was built: rebuild.
    const { containerd: _, ...older } = STAMP;
    expect(parseStamp(JSON.stringify(older))).toBeUndefined();
    expect(parseStamp('{"kubernetes":"v1.37.2"')).toBeUndefined();
    expect(parseStamp('{"kubernetes":"v1.37.2"}')).toBeUndefined();
    expect(parseStamp("null")).toBeUndefined();
  });
});
