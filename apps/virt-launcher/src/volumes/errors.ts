/**
 * Errors of the volume image writers. Every refusal is one of these, thrown before any byte of the image is made,
 * so a caller never holds a malformed image: it either has a whole image or an error naming the input at fault.
 */

/** Why an ISO 9660 image could not be written. */
export type IsoImageErrorCode =
  | "INVALID_VOLUME_ID" // empty, longer than 32 characters, or not printable ASCII
  | "INVALID_NAME" // empty, ".", "..", a NUL, a control character, or not well-formed Unicode
  | "NAME_TOO_LONG" // a path component longer than limits.maxNameBytes (UTF-8)
  | "PATH_TOO_DEEP" // more directory levels than limits.maxDepth (ECMA-119 allows 8)
  | "DUPLICATE_PATH" // two files at one path
  | "PATH_CONFLICT" // a path used both as a file and as a directory
  | "TOO_MANY_FILES" // more files and directories than limits.maxFiles
  | "IMAGE_TOO_LARGE" // the image would exceed limits.maxImageBytes
  | "INVALID_OPTION"; // a mode, alignment or timestamp out of range

/** An input the ISO 9660 writer refuses; `code` says which rule, `path` which file (when one is at fault). */
export class IsoImageError extends Error {
  override readonly name = "IsoImageError";
  readonly code: IsoImageErrorCode;
  readonly path: string | undefined;
  constructor(code: IsoImageErrorCode, message: string, options?: { path?: string; cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.path = options?.path;
  }
}

/** Why a cloud-init or config volume's data could not be turned into a disk. */
export type VolumeDataErrorCode =
  | "NO_DATA" // cloud-init: neither user data nor network data (KubeVirt's message)
  | "INVALID_BASE64" // userDataBase64 / networkDataBase64 that does not decode
  | "INVALID_INPUT"; // a value of the wrong type or a key that cannot be a file name

/** A cloud-init or config volume input the disk builders refuse, with KubeVirt's message where it has one. */
export class VolumeDataError extends Error {
  override readonly name = "VolumeDataError";
  readonly code: VolumeDataErrorCode;
  constructor(code: VolumeDataErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}
