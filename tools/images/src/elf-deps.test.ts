import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { ElfFormatError, elfDependencies } from "./elf-deps.ts";

describe("elfDependencies()", () => {
  it("reads the interpreter and DT_NEEDED of a dynamically linked program (this Node)", () => {
    const deps = elfDependencies(readFileSync(process.execPath));
    expect(deps.interpreter).toBe("/lib64/ld-linux-x86-64.so.2");
    expect(deps.needed).toContain("libc.so.6");
  });

  it.each([
    ["a text file", Buffer.from("#!/bin/sh\n".padEnd(80, " "))],
    ["a 32-bit ELF", Buffer.concat([Buffer.from([0x7f, 0x45, 0x4c, 0x46, 1, 1]), Buffer.alloc(70)])],
    [
      "program headers past the end",
      (() => {
        const b = Buffer.alloc(64);
        b.writeUInt32BE(0x7f454c46, 0);
        b[4] = 2;
        b[5] = 1;
        b.writeBigUInt64LE(1000n, 0x20);
        b.writeUInt16LE(56, 0x36);
        b.writeUInt16LE(4, 0x38);
        return b;
      })(),
    ],
  ])("refuses %s with ElfFormatError", (_what, data) => {
    expect(() => elfDependencies(data)).toThrow(ElfFormatError);
  });
});
