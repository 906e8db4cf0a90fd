import { describe, expect, it } from "vitest";
import { expandFlagsError } from "./expand.ts";

describe("virtctl expand flags (KubeVirt expandArgs)", () => {
  it.each([
    ["vm", undefined, "yaml", undefined],
    [undefined, "-", "json", undefined],
    [undefined, undefined, "yaml", "error invalid arguments - VirtualMachine name or file must be provided"],
    [
      "vm",
      "f.yaml",
      "yaml",
      "if any flags in the group [file vm] are set none of the others can be; [file vm] were all set",
    ],
    ["vm", undefined, "xml", "error not supported output format defined: xml"],
  ])("--vm %s --file %s -o %s", (vm, file, output, message) => {
    expect(expandFlagsError(vm, file, output)).toBe(message);
  });
});
