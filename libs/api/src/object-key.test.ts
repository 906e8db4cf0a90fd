import { describe, expect, it } from "vitest";
import { keyOf, objectKey, splitKey } from "./object-key.ts";

describe("object keys", () => {
  it.each([
    [{ metadata: { namespace: "default", name: "vm-cirros" } }, "default/vm-cirros"],
    [{ metadata: { name: "policy-a" } }, "policy-a"],
    [{ metadata: { namespace: "", name: "cluster-thing" } }, "cluster-thing"],
  ])("keyOf(%j) is %s", (obj, key) => {
    expect(keyOf(obj)).toBe(key);
    expect(splitKey(keyOf(obj)).name).toBe(obj.metadata.name);
  });

  it("keyOf() throws a TypeError for an object without a name", () => {
    expect(() => keyOf({ metadata: {} })).toThrow(TypeError);
    expect(() => keyOf({})).toThrow("without metadata.name");
  });

  it("objectKey() and splitKey() round-trip", () => {
    expect(splitKey(objectKey("ns", "a"))).toEqual({ namespace: "ns", name: "a" });
    expect(splitKey("a")).toEqual({ namespace: "", name: "a" });
    expect(() => splitKey("a/b/c")).toThrow('Unexpected key format: "a/b/c"');
  });
});
