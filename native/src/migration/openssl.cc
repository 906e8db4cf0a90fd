#include "migration/openssl.h"

#include <dlfcn.h>

namespace kvmts::migration::ossl {
namespace {

// Sanitizer runtimes refuse RTLD_DEEPBIND, and their test binaries carry no other OpenSSL: they load it plainly.
#if defined(__SANITIZE_ADDRESS__)
constexpr int kDlopenFlags = RTLD_NOW | RTLD_LOCAL;
#else
constexpr int kDlopenFlags = RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND;
#endif

template <typename F>
void Bind(void* handle, const char* name, F* out, std::string* error) {
  *out = reinterpret_cast<F>(dlsym(handle, name));
  if (*out == nullptr && error->empty()) *error = std::string("OpenSSL has no ") + name;
}

#define KVT_BIND(h, lib, name) Bind(h, #name, &(lib).name, &(lib).error)

Library Load() {
  Library l;
  // libcrypto first: libssl's dependency then resolves to this same copy, inside the same deep-bound scope.
  void* c = dlopen("libcrypto.so.3", kDlopenFlags);
  void* s = c == nullptr ? nullptr : dlopen("libssl.so.3", kDlopenFlags);
  if (c == nullptr || s == nullptr) {
    l.error = std::string("cannot load OpenSSL 3 (libcrypto.so.3, libssl.so.3; Debian: apt-get install libssl3): ") +
              dlerror();
    return l;
  }
  KVT_BIND(c, l, EVP_CIPHER_CTX_new);
  KVT_BIND(c, l, EVP_CIPHER_CTX_free);
  KVT_BIND(c, l, EVP_CIPHER_CTX_ctrl);
  KVT_BIND(c, l, EVP_aes_128_gcm);
  KVT_BIND(c, l, EVP_EncryptInit_ex);
  KVT_BIND(c, l, EVP_EncryptUpdate);
  KVT_BIND(c, l, EVP_EncryptFinal_ex);
  KVT_BIND(c, l, EVP_DecryptInit_ex);
  KVT_BIND(c, l, EVP_DecryptUpdate);
  KVT_BIND(c, l, EVP_DecryptFinal_ex);
  KVT_BIND(c, l, BIO_new_mem_buf);
  KVT_BIND(c, l, BIO_free);
  KVT_BIND(c, l, BIO_ctrl);
  KVT_BIND(c, l, PEM_read_bio_X509);
  KVT_BIND(c, l, PEM_read_bio_PrivateKey);
  KVT_BIND(c, l, X509_free);
  KVT_BIND(c, l, EVP_PKEY_free);
  KVT_BIND(c, l, X509_cmp);
  KVT_BIND(c, l, X509_get_subject_name);
  KVT_BIND(c, l, X509_NAME_oneline);
  KVT_BIND(c, l, X509_STORE_CTX_get_current_cert);
  KVT_BIND(c, l, X509_STORE_CTX_get_error_depth);
  KVT_BIND(c, l, X509_STORE_CTX_get_error);
  KVT_BIND(c, l, X509_STORE_CTX_set_error);
  KVT_BIND(c, l, X509_STORE_CTX_get_ex_data);
  KVT_BIND(c, l, X509_STORE_add_cert);
  KVT_BIND(c, l, X509_STORE_set_flags);
  KVT_BIND(c, l, X509_verify_cert_error_string);
  KVT_BIND(c, l, ERR_get_error);
  KVT_BIND(c, l, ERR_error_string_n);
  KVT_BIND(c, l, ERR_clear_error);
  KVT_BIND(s, l, TLS_method);
  KVT_BIND(s, l, SSL_CTX_new);
  KVT_BIND(s, l, SSL_CTX_free);
  KVT_BIND(s, l, SSL_CTX_ctrl);
  KVT_BIND(s, l, SSL_CTX_set_options);
  KVT_BIND(s, l, SSL_CTX_set_ciphersuites);
  KVT_BIND(s, l, SSL_CTX_use_certificate);
  KVT_BIND(s, l, SSL_CTX_use_PrivateKey);
  KVT_BIND(s, l, SSL_CTX_check_private_key);
  KVT_BIND(s, l, SSL_CTX_set_verify);
  KVT_BIND(s, l, SSL_CTX_get_cert_store);
  KVT_BIND(s, l, SSL_CTX_set_keylog_callback);
  KVT_BIND(s, l, SSL_CTX_set_num_tickets);
  KVT_BIND(s, l, SSL_new);
  KVT_BIND(s, l, SSL_free);
  KVT_BIND(s, l, SSL_set_fd);
  KVT_BIND(s, l, SSL_connect);
  KVT_BIND(s, l, SSL_accept);
  KVT_BIND(s, l, SSL_get_error);
  KVT_BIND(s, l, SSL_set_ex_data);
  KVT_BIND(s, l, SSL_get_ex_data);
  KVT_BIND(s, l, SSL_get_ex_data_X509_STORE_CTX_idx);
  KVT_BIND(s, l, SSL_has_pending);
  KVT_BIND(s, l, SSL_read_ex);
  KVT_BIND(s, l, SSL_write_ex);
  KVT_BIND(s, l, SSL_get_rbio);
  KVT_BIND(s, l, SSL_get_wbio);
  KVT_BIND(s, l, SSL_get_current_cipher);
  KVT_BIND(s, l, SSL_CIPHER_get_name);
  KVT_BIND(s, l, SSL_version);
  KVT_BIND(s, l, SSL_set_msg_callback);
  return l;  // the handles stay open for the life of the process
}

#undef KVT_BIND

}  // namespace

const Library& Get() {
  static const Library lib = Load();
  return lib;
}

Status Available() {
  const Library& l = Get();
  if (!l.error.empty()) return Error{ENOSYS, "migration stream encryption", l.error};
  return OkStatus();
}

std::string TakeErrors() {
  const Library& l = Get();
  std::string out;
  if (!l.error.empty()) return out;
  for (unsigned long e = l.ERR_get_error(); e != 0; e = l.ERR_get_error()) {
    char buf[256];
    l.ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out;
}

}  // namespace kvmts::migration::ossl
