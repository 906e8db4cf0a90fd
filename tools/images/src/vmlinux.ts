/**
 * The uncompressed kernel inside a bzImage: what Firecracker boots on x86_64 (an ELF `vmlinux`, entered at its
 * 64-bit entry point), so a VMM that can load it skips the kernel's self-decompression (seconds of guest CPU under
 * nested virtualization). The bzImage's setup header says where the compressed payload is (payload_offset at 0x248,
 * relative to the protected-mode part, and payload_length at 0x24c); its first bytes say the compressor, and the
 * Debian tool for it (xz-utils, zstd) decompresses it. What comes out is `vmlinux.bin` (the ELF, then the relocation
 * table the decompressor would apply, which ELF loaders ignore).
 */
import { spawn } from "node:child_process";
import { ensureHostTools } from "./host-tools.ts";

/** The bzImage is not one this can unpack, or the decompressor failed; `message` says which and what to do. */
export class VmlinuxExtractError extends Error {
  override readonly name = "VmlinuxExtractError";
}

const COMPRESSORS: readonly { name: string; magic: Buffer; command: readonly string[]; pkg: string }[] = [
  // --single-stream: the payload ends with the uncompressed size (4 bytes), which is not xz data.
  { name: "xz", magic: Buffer.from("fd377a585a00", "hex"), command: ["xz", "-dc", "--single-stream"], pkg: "xz-utils" },
  { name: "zstd", magic: Buffer.from("28b52ffd", "hex"), command: ["zstd", "-dcq"], pkg: "zstd" },
];

/** Where the compressed payload lies in `bzImage` and which compressor made it. */
export function locatePayload(bzImage: Buffer): { offset: number; length: number; compressor: string } {
  if (bzImage.length < 0x250 || bzImage.readUInt32LE(0x202) !== 0x53726448) {
    throw new VmlinuxExtractError("not a bzImage (no HdrS setup header)");
  }
  if (bzImage.readUInt16LE(0x206) < 0x0208)
    throw new VmlinuxExtractError("boot protocol older than 2.08: no payload fields");
  const setupBytes = ((bzImage[0x1f1] || 4) + 1) * 512;
  const offset = setupBytes + bzImage.readUInt32LE(0x248);
  const length = bzImage.readUInt32LE(0x24c);
  if (length === 0 || offset + length > bzImage.length) throw new VmlinuxExtractError("payload outside the file");
  const head = bzImage.subarray(offset, offset + 8);
  const c = COMPRESSORS.find((k) => head.subarray(0, k.magic.length).equals(k.magic));
  if (!c)
    throw new VmlinuxExtractError(`payload compressed with an unsupported method (magic ${head.toString("hex")})`);
  return { offset, length, compressor: c.name };
}

/**
 * The vmlinux of `bzImage` for an image build, or undefined (with the reason passed to `warn`) when it cannot be
 * had: the payload's decompressor is installed first if missing (ensureHostTools: apt-get when root), and
 * when that fails too the image keeps only its bzImage, which every VMM still boots.
 */
export async function tryExtractVmlinux(bzImage: Buffer, warn: (why: string) => void): Promise<Buffer | undefined> {
  try {
    const c = COMPRESSORS.find((k) => k.name === locatePayload(bzImage).compressor);
    if (c) await ensureHostTools([{ bin: c.command[0] ?? c.name, pkg: c.pkg }]);
    return await extractVmlinux(bzImage);
  } catch (err) {
    // Not fatal: the uncompressed kernel only speeds up boots on VMMs that load it; the bzImage stays.
    warn(`no uncompressed kernel (vmlinux) in the image, only the bzImage: ${(err as Error).message}`);
    return undefined;
  }
}

/** Decompresses the bzImage's payload; resolves with the ELF vmlinux. */
export async function extractVmlinux(bzImage: Buffer): Promise<Buffer> {
  const at = locatePayload(bzImage);
  const c = COMPRESSORS.find((k) => k.name === at.compressor);
  if (!c) throw new VmlinuxExtractError(`no decompressor for ${at.compressor}`);
  const [bin, ...args] = c.command;
  const out = await new Promise<Buffer>((resolve, reject) => {
    const child = spawn(bin ?? c.name, args, { stdio: ["pipe", "pipe", "pipe"] });
    const chunks: Buffer[] = [];
    let err = "";
    child.stdout.on("data", (b: Buffer) => chunks.push(b));
    child.stderr.on("data", (b: Buffer) => (err += b.toString()));
    child.once("error", (e: NodeJS.ErrnoException) =>
      reject(
        new VmlinuxExtractError(
          e.code === "ENOENT"
            ? `${c.name} is not installed: apt-get install ${c.pkg} (or boot the bzImage)`
            : `${c.name}: ${e.message}`,
        ),
      ),
    );
    child.once("close", (code) =>
      code === 0 ? resolve(Buffer.concat(chunks)) : reject(new VmlinuxExtractError(`${c.name} failed: ${err.trim()}`)),
    );
    child.stdin.on("error", () => {}); // an early exit is reported by "close"
    child.stdin.end(bzImage.subarray(at.offset, at.offset + at.length));
  });
  if (out.length < 64 || out.readUInt32BE(0) !== 0x7f454c46) {
    throw new VmlinuxExtractError("the decompressed payload is not an ELF vmlinux");
  }
  return out;
}
