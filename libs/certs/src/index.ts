/** @kvt/certs: the platform's one certificate module (CAs, serving and client certificates, PEM files). */

/** Certificates as `<name>.crt`/`<name>.key` files with owner-only key and directory modes; reload on change. */
export {
  type CertificateFiles,
  certificateFiles,
  ensureCertificate,
  type FileWatch,
  readCertificate,
  watchFiles,
  writeCertificate,
} from "./cert-files.ts";
/** CA and leaf generation, certificate reading, renewal check, and the error they throw. */
export {
  type CertificateAndKey,
  CertificateError,
  type CertificateInfo,
  type CertificateRequest,
  certificateInfo,
  generateCa,
  isClientCertificate,
  isIssuedBy,
  issueCertificate,
  needsRenewal,
} from "./certs.ts";
