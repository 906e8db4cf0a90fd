import { execFileSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { extractVmlinux, locatePayload, tryExtractVmlinux, VmlinuxExtractError } from "./vmlinux.ts";

/** A bzImage-shaped file: setup header (HdrS, protocol 2.15), one setup sector, then `payload` at payload_offset. */
function fakeBzImage(payload: Buffer, payloadOffset = 0x100): Buffer {
  const setupBytes = 2 * 512;
  const file = Buffer.alloc(setupBytes + payloadOffset + payload.length + 4);
  file[0x1f1] = 1;
  file.writeUInt16LE(0xaa55, 0x1fe);
  file.writeUInt32LE(0x53726448, 0x202);
  file.writeUInt16LE(0x020f, 0x206);
  file.writeUInt32LE(payloadOffset, 0x248);
  file.writeUInt32LE(payload.length, 0x24c);
  payload.copy(file, setupBytes + payloadOffset);
  return file;
}

const elf = Buffer.concat([Buffer.from([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1]), Buffer.alloc(200, 7)]);

describe("vmlinux extraction", () => {
  it("finds the xz payload and unpacks the ELF inside, ignoring the size the kernel build appends", async () => {
    const xz = execFileSync("xz", ["-c", "--check=crc32"], { input: elf });
    const sized = Buffer.concat([xz, Buffer.from([elf.length, 0, 0, 0])]); // as the kernel's size_append does
    const bz = fakeBzImage(sized);
    expect(locatePayload(bz)).toEqual({ offset: 1024 + 0x100, length: sized.length, compressor: "xz" });
    expect((await extractVmlinux(bz)).equals(elf)).toBe(true);
  });

  it("refuses what is not a bzImage, an unknown compressor and a payload that is not an ELF", async () => {
    expect(() => locatePayload(Buffer.alloc(4096))).toThrow(/not a bzImage/);
    expect(() => locatePayload(fakeBzImage(Buffer.from("BZh91AY&SY")))).toThrow(/unsupported method/);
    const notElf = fakeBzImage(execFileSync("xz", ["-c"], { input: Buffer.alloc(100, 1) }));
    await expect(extractVmlinux(notElf)).rejects.toBeInstanceOf(VmlinuxExtractError);
    await expect(extractVmlinux(notElf)).rejects.toThrow(/not an ELF vmlinux/);
    const broken = fakeBzImage(Buffer.concat([Buffer.from("fd377a585a00", "hex"), Buffer.alloc(64, 9)]));
    await expect(extractVmlinux(broken)).rejects.toThrow(/xz failed/);
  });

  it("for an image build, gives up on the vmlinux with a reason instead of failing the build", async () => {
    const warnings: string[] = [];
    const xz = execFileSync("xz", ["-c", "--check=crc32"], { input: elf });
    expect((await tryExtractVmlinux(fakeBzImage(xz), (w) => warnings.push(w)))?.equals(elf)).toBe(true);
    expect(warnings).toEqual([]);
    expect(await tryExtractVmlinux(fakeBzImage(Buffer.from("BZh91AY&SY")), (w) => warnings.push(w))).toBeUndefined();
    expect(warnings).toEqual([expect.stringMatching(/only the bzImage: .*unsupported method/)]);
  });
});
