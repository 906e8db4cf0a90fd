/**
 * The one error type of the disk image reader (disk-image.ts): every refusal names the rule (`code`) and the file at
 * fault (`path`), so the launcher can put the reason in the VMI's status as it is.
 */

/** Why a disk image was refused. */
export type DiskImageErrorCode =
  | "NOT_A_FILE" // a directory, FIFO, socket or device where an image file was expected
  | "BAD_MAGIC" // a file declared (or found) to be qcow2 does not start with "QFI\xfb"
  | "UNSUPPORTED_VERSION" // qcow2 version other than 2 or 3 (qcow v1 included)
  | "UNSUPPORTED_FORMAT" // vmdk, vhdx, vdi, qed, or a backing format other than raw/qcow2
  | "UNSUPPORTED_FEATURE" // encryption, external data file, extended L2, zstd, unknown incompatible bits, corrupt bit
  | "BAD_HEADER" // a header field out of range (cluster bits, header length, L1 size/alignment, backing name)
  | "BAD_SIZE" // virtual size not a multiple of 512
  | "TOO_LARGE" // a size over the configured limit (virtual size, L1 table)
  | "TRUNCATED" // the file ends inside its header or inside a data cluster it maps
  | "PAST_EOF" // an L1 or L2 table that lies (partly) past the end of the file
  | "BAD_TABLE_ENTRY" // an L1/L2 entry whose offset is not cluster aligned
  | "BAD_COMPRESSED_CLUSTER" // a compressed cluster that does not inflate to exactly one cluster
  | "BACKING_PATH_REFUSED" // an absolute backing path, or one that leaves allowedDir
  | "BACKING_LOOP" // the backing chain comes back to a file already in it
  | "BACKING_TOO_DEEP" // more backing files than maxChainDepth
  | "DESTINATION_IN_CHAIN" // the destination is one of the images being read
  | "ABORTED" // the caller's AbortSignal fired
  | "IO_ERROR"; // open/read/write failed (missing backing file, EACCES, ENOSPC): see `cause`

/** A disk image the reader refuses, or an import that failed; `code` says which rule, `path` which file. */
export class DiskImageError extends Error {
  override readonly name = "DiskImageError";
  readonly code: DiskImageErrorCode;
  readonly path: string;
  constructor(code: DiskImageErrorCode, path: string, message: string, options?: { cause?: unknown }) {
    super(`${path}: ${message}`, options?.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.path = path;
  }
}
