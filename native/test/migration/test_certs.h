// Test certificates for the migration TLS tests and the stream bench: a self-signed ECDSA P-256 certificate and its
// key (PEM), made with the system's libcrypto (the one migration/openssl.cc loads), like the per-migration
// certificates virt-handler mints with @peculiar/x509. Test code only: the addon never makes certificates.
#pragma once

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace mtest {

struct CertAndKey {
  std::string cert_pem;
  std::string key_pem;
};

/** A self-signed certificate for `cn`, valid from `from_s` to `to_s` seconds from now (negative: in the past). */
inline CertAndKey MakeCert(const std::string& cn, long from_s = -60, long to_s = 3600) {
  void* c = dlopen("libcrypto.so.3", RTLD_NOW | RTLD_LOCAL);
  if (c == nullptr) {
    std::fprintf(stderr, "test certificates need libcrypto.so.3: %s\n", dlerror());
    std::abort();
  }
  auto sym = [c](const char* name) {
    void* p = dlsym(c, name);
    if (p == nullptr) {
      std::fprintf(stderr, "libcrypto has no %s\n", name);
      std::abort();
    }
    return p;
  };
  auto keygen = reinterpret_cast<void* (*)(void*, const char*, const char*, ...)>(sym("EVP_PKEY_Q_keygen"));
  auto x509_new = reinterpret_cast<void* (*)()>(sym("X509_new"));
  auto set_version = reinterpret_cast<int (*)(void*, long)>(sym("X509_set_version"));
  auto serial = reinterpret_cast<void* (*)(void*)>(sym("X509_get_serialNumber"));
  auto asn1_set = reinterpret_cast<int (*)(void*, long)>(sym("ASN1_INTEGER_set"));
  auto not_before = reinterpret_cast<void* (*)(void*)>(sym("X509_getm_notBefore"));
  auto not_after = reinterpret_cast<void* (*)(void*)>(sym("X509_getm_notAfter"));
  auto gmtime_adj = reinterpret_cast<void* (*)(void*, long)>(sym("X509_gmtime_adj"));
  auto set_pubkey = reinterpret_cast<int (*)(void*, void*)>(sym("X509_set_pubkey"));
  auto subject = reinterpret_cast<void* (*)(void*)>(sym("X509_get_subject_name"));
  auto add_entry = reinterpret_cast<int (*)(void*, const char*, int, const unsigned char*, int, int, int)>(
      sym("X509_NAME_add_entry_by_txt"));
  auto set_issuer = reinterpret_cast<int (*)(void*, void*)>(sym("X509_set_issuer_name"));
  auto sha256 = reinterpret_cast<const void* (*)()>(sym("EVP_sha256"));
  auto sign = reinterpret_cast<int (*)(void*, void*, const void*)>(sym("X509_sign"));
  auto bio_s_mem = reinterpret_cast<const void* (*)()>(sym("BIO_s_mem"));
  auto bio_new = reinterpret_cast<void* (*)(const void*)>(sym("BIO_new"));
  auto bio_ctrl = reinterpret_cast<long (*)(void*, int, long, void*)>(sym("BIO_ctrl"));
  auto bio_free = reinterpret_cast<int (*)(void*)>(sym("BIO_free"));
  auto write_x509 = reinterpret_cast<int (*)(void*, void*)>(sym("PEM_write_bio_X509"));
  auto write_key = reinterpret_cast<int (*)(void*, void*, const void*, const void*, int, void*, void*)>(
      sym("PEM_write_bio_PrivateKey"));
  auto x509_free = reinterpret_cast<void (*)(void*)>(sym("X509_free"));
  auto pkey_free = reinterpret_cast<void (*)(void*)>(sym("EVP_PKEY_free"));

  static long next_serial = 1;
  void* key = keygen(nullptr, nullptr, "EC", "P-256");
  void* x = x509_new();
  set_version(x, 2);
  asn1_set(serial(x), next_serial++);
  gmtime_adj(not_before(x), from_s);
  gmtime_adj(not_after(x), to_s);
  set_pubkey(x, key);
  void* name = subject(x);
  add_entry(name, "CN", 0x1001 /* MBSTRING_ASC */, reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  set_issuer(x, name);
  sign(x, key, sha256());
  auto pem = [&](bool is_key) {
    void* bio = bio_new(bio_s_mem());
    if (is_key) {
      write_key(bio, key, nullptr, nullptr, 0, nullptr, nullptr);
    } else {
      write_x509(bio, x);
    }
    char* data = nullptr;
    long len = bio_ctrl(bio, 3 /* BIO_CTRL_INFO */, 0, &data);
    std::string out(data, static_cast<size_t>(len));
    bio_free(bio);
    return out;
  };
  CertAndKey out{pem(false), pem(true)};
  x509_free(x);
  pkey_free(key);
  return out;
}

}  // namespace mtest
