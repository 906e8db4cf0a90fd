// OpenSSL 3 from the system (Debian's libssl3: libssl.so.3 and libcrypto.so.3), loaded at first use with dlopen and
// its own symbol scope (RTLD_DEEPBIND), so it binds to itself and not to the copy of OpenSSL that Node's executable
// exports (another version, other structure layouts), and the addon has no build dependency on OpenSSL's headers.
// Only the stable OpenSSL 3 ABI is used, through the function table below; opaque types are void*.
// docs/decisions/0013-migration-stream-encryption.md says why OpenSSL (and not Nettle, or our own AES).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "kvm/result.h"

namespace kvmts::migration::ossl {

// Constants of the OpenSSL 3 ABI (include/openssl/*.h), as the library defines them.
inline constexpr int kCtrlAeadGetTag = 0x10;  // EVP_CTRL_AEAD_GET_TAG
inline constexpr int kCtrlAeadSetTag = 0x11;  // EVP_CTRL_AEAD_SET_TAG
inline constexpr int kSslCtrlMode = 33;       // SSL_CTRL_MODE
inline constexpr int kSslCtrlSetMinProto = 123;
inline constexpr int kSslCtrlSetMaxProto = 124;
inline constexpr long kTls13Version = 0x0304;
inline constexpr uint64_t kSslOpEnableKtls = uint64_t{1} << 3;
inline constexpr uint64_t kSslOpNoTicket = uint64_t{1} << 14;
inline constexpr int kSslVerifyPeer = 0x01;
inline constexpr int kSslVerifyFailIfNoPeerCert = 0x02;
inline constexpr int kSslErrorSsl = 1, kSslErrorWantRead = 2, kSslErrorWantWrite = 3, kSslErrorSyscall = 5,
                     kSslErrorZeroReturn = 6;
inline constexpr int kSsl3RtHeader = 0x100;  // SSL3_RT_HEADER: the msg callback's "record header" content type
inline constexpr int kBioCtrlGetKtlsSend = 73, kBioCtrlGetKtlsRecv = 76;
inline constexpr unsigned long kX509VFlagPartialChain = 0x80000;
inline constexpr int kX509VErrCertRejected = 28;  // X509_V_ERR_CERT_REJECTED

struct Library {
  // libcrypto: AES-GCM (the user-space record layer)
  using CipherInitFn = int (*)(void*, const void*, void*, const unsigned char*, const unsigned char*);
  using CipherUpdateFn = int (*)(void*, unsigned char*, int*, const unsigned char*, int);
  using CipherFinalFn = int (*)(void*, unsigned char*, int*);
  void* (*EVP_CIPHER_CTX_new)() = nullptr;
  void (*EVP_CIPHER_CTX_free)(void*) = nullptr;
  int (*EVP_CIPHER_CTX_ctrl)(void*, int, int, void*) = nullptr;
  const void* (*EVP_aes_128_gcm)() = nullptr;
  CipherInitFn EVP_EncryptInit_ex = nullptr, EVP_DecryptInit_ex = nullptr;
  CipherUpdateFn EVP_EncryptUpdate = nullptr, EVP_DecryptUpdate = nullptr;
  CipherFinalFn EVP_EncryptFinal_ex = nullptr, EVP_DecryptFinal_ex = nullptr;
  // libcrypto: PEM, X.509, errors
  void* (*BIO_new_mem_buf)(const void*, int) = nullptr;
  int (*BIO_free)(void*) = nullptr;
  long (*BIO_ctrl)(void*, int, long, void*) = nullptr;
  void* (*PEM_read_bio_X509)(void*, void**, void*, void*) = nullptr;
  void* (*PEM_read_bio_PrivateKey)(void*, void**, void*, void*) = nullptr;
  void (*X509_free)(void*) = nullptr;
  void (*EVP_PKEY_free)(void*) = nullptr;
  int (*X509_cmp)(const void*, const void*) = nullptr;
  void* (*X509_get_subject_name)(const void*) = nullptr;
  char* (*X509_NAME_oneline)(const void*, char*, int) = nullptr;
  void* (*X509_STORE_CTX_get_current_cert)(void*) = nullptr;
  int (*X509_STORE_CTX_get_error_depth)(void*) = nullptr;
  int (*X509_STORE_CTX_get_error)(void*) = nullptr;
  void (*X509_STORE_CTX_set_error)(void*, int) = nullptr;
  void* (*X509_STORE_CTX_get_ex_data)(void*, int) = nullptr;
  int (*X509_STORE_add_cert)(void*, void*) = nullptr;
  int (*X509_STORE_set_flags)(void*, unsigned long) = nullptr;
  const char* (*X509_verify_cert_error_string)(long) = nullptr;
  unsigned long (*ERR_get_error)() = nullptr;
  void (*ERR_error_string_n)(unsigned long, char*, size_t) = nullptr;
  void (*ERR_clear_error)() = nullptr;
  // libssl
  const void* (*TLS_method)() = nullptr;
  void* (*SSL_CTX_new)(const void*) = nullptr;
  void (*SSL_CTX_free)(void*) = nullptr;
  long (*SSL_CTX_ctrl)(void*, int, long, void*) = nullptr;
  uint64_t (*SSL_CTX_set_options)(void*, uint64_t) = nullptr;
  int (*SSL_CTX_set_ciphersuites)(void*, const char*) = nullptr;
  int (*SSL_CTX_use_certificate)(void*, void*) = nullptr;
  int (*SSL_CTX_use_PrivateKey)(void*, void*) = nullptr;
  int (*SSL_CTX_check_private_key)(const void*) = nullptr;
  void (*SSL_CTX_set_verify)(void*, int, int (*)(int, void*)) = nullptr;
  void* (*SSL_CTX_get_cert_store)(const void*) = nullptr;
  void (*SSL_CTX_set_keylog_callback)(void*, void (*)(const void*, const char*)) = nullptr;
  int (*SSL_CTX_set_num_tickets)(void*, size_t) = nullptr;
  void* (*SSL_new)(void*) = nullptr;
  void (*SSL_free)(void*) = nullptr;
  int (*SSL_set_fd)(void*, int) = nullptr;
  int (*SSL_connect)(void*) = nullptr;
  int (*SSL_accept)(void*) = nullptr;
  int (*SSL_get_error)(const void*, int) = nullptr;
  int (*SSL_set_ex_data)(void*, int, void*) = nullptr;
  void* (*SSL_get_ex_data)(const void*, int) = nullptr;
  int (*SSL_get_ex_data_X509_STORE_CTX_idx)() = nullptr;
  int (*SSL_has_pending)(const void*) = nullptr;
  int (*SSL_read_ex)(void*, void*, size_t, size_t*) = nullptr;
  int (*SSL_write_ex)(void*, const void*, size_t, size_t*) = nullptr;
  void* (*SSL_get_rbio)(const void*) = nullptr;
  void* (*SSL_get_wbio)(const void*) = nullptr;
  const void* (*SSL_get_current_cipher)(const void*) = nullptr;
  const char* (*SSL_CIPHER_get_name)(const void*) = nullptr;
  int (*SSL_version)(const void*) = nullptr;
  void (*SSL_set_msg_callback)(void*, void (*)(int, int, int, const void*, size_t, void*, void*)) = nullptr;

  std::string error;  // why it is unusable; empty when loaded
};

/** The loaded library (loaded once; check `error` or use Available()). */
const Library& Get();

/** Whether OpenSSL 3 loads here; the error says what to install otherwise. */
Status Available();

/** OpenSSL's queued errors as one line ("a; b"), and clears the queue; empty when none. */
std::string TakeErrors();

}  // namespace kvmts::migration::ossl
