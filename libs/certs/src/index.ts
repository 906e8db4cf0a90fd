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
  MIGRATION_CERTIFICATE_VALIDITY_MS,
  mintMigrationCertificate,
  needsRenewal,
  type Validity,
} from "./certs.ts";
/** KubeVirt's rotation rules: when to renew a certificate, which CAs a trust bundle keeps, key/cert pairing. */
export {
  keyMatchesCertificate,
  MAX_CERTIFICATES_IN_BUNDLE,
  type MergedBundle,
  mergeCaBundle,
  type RotationInput,
  rotationDeadline,
  splitCertificates,
} from "./rotation.ts";
/** A component's certificate, key and CA bundle kept current without a restart (files and a CA bundle source). */
export {
  type CaBundleSource,
  fileCaBundle,
  type TlsMaterial,
  type TlsMaterialOptions,
  type TlsMaterialWatch,
  watchTlsMaterial,
} from "./tls-material.ts";
