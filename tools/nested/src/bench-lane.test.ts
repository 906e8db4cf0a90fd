import { describe, expect, it } from "vitest";
import { argsForL1, l1CpusOf } from "./bench-lane.ts";

describe("--l1-cpus", () => {
  it("is 1 unless given, and 1 to 4 when given", () => {
    expect(l1CpusOf(["--rounds", "3"])).toBe(1);
    expect(l1CpusOf(["--l1-cpus", "2", "--rounds", "3"])).toBe(2);
    expect(() => l1CpusOf(["--l1-cpus", "0"])).toThrow("--l1-cpus 0: expected 1 to 4");
    expect(() => l1CpusOf(["--l1-cpus"])).toThrow("--l1-cpus undefined: expected 1 to 4");
  });

  it("is not passed to the bench inside L1, nor is --nested", () => {
    expect(argsForL1(["--nested", "--l1-cpus", "2", "--rounds", "3", "--migration-only"])).toEqual([
      "--rounds",
      "3",
      "--migration-only",
    ]);
  });
});
