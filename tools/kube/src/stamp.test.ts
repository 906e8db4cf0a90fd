import { describe, expect, it } from "vitest";
import { type BuildStamp, mergeStamp, parseStamp, staleSteps } from "./stamp.ts";

const WANT = {
  kubernetes: "v1.37.2",
  etcd: "v3.7.3",
  containerd: "v2.4.2",
  kwok: "v0.8.0",
  "local-path": "v0.0.30",
  go: "go1.26.8",
};
const STAMP: BuildStamp = {
  ...WANT,
  seconds: { kubernetes: 1800, etcd: 200, containerd: 240, kwok: 90, "local-path": 60 },
  sizes: { etcd: 1 },
  builtAt: "x",
};
const BINARIES = {
  kubernetes: ["kube-apiserver"],
  etcd: ["etcd"],
  containerd: ["containerd"],
  kwok: ["kwok"],
  "local-path": ["local-path-provisioner"],
};

describe("staleSteps", () => {
  it("is empty when versions, go and every binary match", () => {
    expect(staleSteps(STAMP, WANT, BINARIES, () => true)).toEqual({});
  });

  it("names only the steps whose version changed", () => {
    expect(staleSteps({ ...STAMP, kubernetes: "v1.36.3" }, WANT, BINARIES, () => true)).toEqual({
      kubernetes: "kubernetes changed: v1.36.3 -> v1.37.2",
    });
    expect(staleSteps({ ...STAMP, etcd: "v3.6.16" }, WANT, BINARIES, () => true)).toEqual({
      etcd: "etcd changed: v3.6.16 -> v3.7.3",
    });
    expect(staleSteps({ ...STAMP, kwok: "v0.7.0" }, WANT, BINARIES, () => true)).toEqual({
      kwok: "kwok changed: v0.7.0 -> v0.8.0",
    });
  });

  it("builds a step the stamp predates, and only that one", () => {
    const { kwok: _, ...older } = STAMP;
    expect(staleSteps(older, WANT, BINARIES, () => true)).toEqual({ kwok: "kwok v0.8.0 not built yet" });
    const { "local-path": __, ...beforeLocalPath } = STAMP;
    expect(staleSteps(beforeLocalPath, WANT, BINARIES, () => true)).toEqual({
      "local-path": "local-path v0.0.30 not built yet",
    });
  });

  it("rebuilds every step without a stamp or with another Go", () => {
    const all = (reason: string) => ({
      kubernetes: reason,
      etcd: reason,
      containerd: reason,
      kwok: reason,
      "local-path": reason,
    });
    expect(staleSteps(undefined, WANT, BINARIES, () => true)).toEqual(all("no build yet"));
    expect(staleSteps({ ...STAMP, go: "go1.26.7" }, WANT, BINARIES, () => true)).toEqual(
      all("go changed: go1.26.7 -> go1.26.8"),
    );
  });

  it("rebuilds the step whose binary is gone", () => {
    expect(staleSteps(STAMP, WANT, BINARIES, (b) => b !== "etcd")).toEqual({ etcd: "missing binaries: etcd" });
  });
});

describe("mergeStamp", () => {
  it("keeps the steps not rebuilt, with their versions and seconds", () => {
    const { kwok: _, ...older } = STAMP;
    const merged = mergeStamp(older, WANT, { kwok: 95 }, { kwok: 7, etcd: 1 }, "y");
    expect(merged).toEqual({
      ...WANT,
      seconds: { ...STAMP.seconds, kwok: 95 },
      sizes: { kwok: 7, etcd: 1 },
      builtAt: "y",
    });
  });

  it("drops what another Go built", () => {
    const merged = mergeStamp({ ...STAMP, go: "go1.25.0" }, WANT, { kwok: 95 }, {}, "y");
    expect(merged).toEqual({ kwok: "v0.8.0", go: "go1.26.8", seconds: { kwok: 95 }, sizes: {}, builtAt: "y" });
  });
});

describe("parseStamp", () => {
  it("round-trips a stamp", () => {
    expect(parseStamp(JSON.stringify(STAMP))).toEqual(STAMP);
  });

  it("reads a stamp from before a step existed (that step is then unbuilt)", () => {
    const { kwok: _, ...older } = STAMP;
    expect(parseStamp(JSON.stringify(older))).toEqual(older);
  });

  it("treats a half-written or foreign file as no stamp", () => {
    expect(parseStamp(JSON.stringify({ ...STAMP, kwok: 1 }))).toBeUndefined();
    expect(parseStamp('{"kubernetes":"v1.37.2"')).toBeUndefined();
    expect(parseStamp('{"kubernetes":"v1.37.2"}')).toBeUndefined();
    expect(parseStamp("null")).toBeUndefined();
  });
});
