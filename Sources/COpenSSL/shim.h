// OpenSSL headers plus `copenssl_` inline wrappers for the function-like macros Swift cannot import.
#pragma once
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ct.h>
#include <openssl/ec.h>
#include <openssl/rsa.h>
#include <openssl/bn.h>

// MARK: SSL_CTX / SSL controls (macros over SSL_CTX_ctrl / SSL_ctrl)

static inline int copenssl_SSL_CTX_set_min_proto_version(SSL_CTX *ctx, int version) {
    return (int)SSL_CTX_set_min_proto_version(ctx, version);
}
static inline int copenssl_SSL_CTX_set_max_proto_version(SSL_CTX *ctx, int version) {
    return (int)SSL_CTX_set_max_proto_version(ctx, version);
}
static inline int copenssl_SSL_CTX_set1_groups_list(SSL_CTX *ctx, const char *list) {
    return (int)SSL_CTX_set1_groups_list(ctx, list);
}
static inline long copenssl_SSL_CTX_set_mode(SSL_CTX *ctx, long mode) { return SSL_CTX_set_mode(ctx, mode); }
/// SSL_OP_IGNORE_UNEXPECTED_EOF (OpenSSL 3): an EOF without close_notify reads as a clean close, no alert sent.
static inline void copenssl_SSL_CTX_ignore_unexpected_eof(SSL_CTX *ctx) {
    SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
}
static inline void copenssl_SSL_CTX_set_read_ahead(SSL_CTX *ctx, int yes) { SSL_CTX_set_read_ahead(ctx, yes); }
static inline int copenssl_SSL_set_tlsext_host_name(SSL *ssl, const char *name) {
    return (int)SSL_set_tlsext_host_name(ssl, name);
}
static inline int copenssl_SSL_get_negotiated_group(SSL *ssl) { return (int)SSL_get_negotiated_group(ssl); }
static inline int copenssl_SSL_add1_chain_cert(SSL *ssl, X509 *x509) { return (int)SSL_add1_chain_cert(ssl, x509); }
static inline int copenssl_SSL_CTX_add1_chain_cert(SSL_CTX *ctx, X509 *x509) {
    return (int)SSL_CTX_add1_chain_cert(ctx, x509);
}
static inline int copenssl_SSL_set_app_data(SSL *ssl, void *data) { return SSL_set_app_data(ssl, data); }
static inline long copenssl_SSL_CTX_set_session_cache_mode(SSL_CTX *ctx, long mode) {
    return SSL_CTX_set_session_cache_mode(ctx, mode);
}
static inline void *copenssl_SSL_get_app_data(const SSL *ssl) { return SSL_get_app_data(ssl); }

// MARK: BIO

static inline void copenssl_BIO_set_retry_read(BIO *bio) { BIO_set_retry_read(bio); }
static inline void copenssl_BIO_clear_retry_flags(BIO *bio) { BIO_clear_retry_flags(bio); }

// MARK: Error queue (ERR_GET_* are inline functions in 3.0; wrapped so the Swift side never depends on that)

static inline int copenssl_ERR_GET_LIB(unsigned long e) { return ERR_GET_LIB(e); }
static inline int copenssl_ERR_GET_REASON(unsigned long e) { return ERR_GET_REASON(e); }

// MARK: Key generation (EVP_EC_gen / EVP_RSA_gen are variadic macros)

static inline EVP_PKEY *copenssl_EVP_EC_gen(const char *curve) { return EVP_EC_gen(curve); }
static inline EVP_PKEY *copenssl_EVP_RSA_gen(unsigned int bits) { return EVP_RSA_gen(bits); }

// MARK: Typed stacks

static inline STACK_OF(X509) *copenssl_sk_X509_new_null(void) { return sk_X509_new_null(); }
static inline int copenssl_sk_X509_num(const STACK_OF(X509) *sk) { return sk_X509_num(sk); }
static inline X509 *copenssl_sk_X509_value(const STACK_OF(X509) *sk, int i) { return sk_X509_value(sk, i); }
static inline int copenssl_sk_X509_push(STACK_OF(X509) *sk, X509 *x) { return sk_X509_push(sk, x); }
static inline void copenssl_sk_X509_free(STACK_OF(X509) *sk) { sk_X509_free(sk); }
static inline void copenssl_sk_X509_pop_free(STACK_OF(X509) *sk) { sk_X509_pop_free(sk, X509_free); }

static inline int copenssl_sk_GENERAL_NAME_num(const STACK_OF(GENERAL_NAME) *sk) { return sk_GENERAL_NAME_num(sk); }
static inline GENERAL_NAME *copenssl_sk_GENERAL_NAME_value(const STACK_OF(GENERAL_NAME) *sk, int i) {
    return sk_GENERAL_NAME_value(sk, i);
}
static inline void copenssl_GENERAL_NAMES_free_any(void *names) { GENERAL_NAMES_free((GENERAL_NAMES *)names); }
static inline int copenssl_GENERAL_NAME_type(const GENERAL_NAME *gn) { return gn->type; }
/// The IA5String (DNS) or OCTET STRING (IP) payload of a SAN entry; NULL for other types.
static inline const ASN1_STRING *copenssl_GENERAL_NAME_string(const GENERAL_NAME *gn) {
    if (gn->type == GEN_DNS) return gn->d.dNSName;
    if (gn->type == GEN_IPADD) return gn->d.iPAddress;
    return NULL;
}

static inline int copenssl_sk_ASN1_OBJECT_num(const STACK_OF(ASN1_OBJECT) *sk) { return sk_ASN1_OBJECT_num(sk); }
static inline ASN1_OBJECT *copenssl_sk_ASN1_OBJECT_value(const STACK_OF(ASN1_OBJECT) *sk, int i) {
    return sk_ASN1_OBJECT_value(sk, i);
}
static inline void copenssl_EXTENDED_KEY_USAGE_free_any(void *eku) {
    EXTENDED_KEY_USAGE_free((EXTENDED_KEY_USAGE *)eku);
}
static inline int copenssl_sk_SCT_num_any(void *scts) { return sk_SCT_num((STACK_OF(SCT) *)scts); }
static inline void copenssl_SCT_LIST_free_any(void *scts) { SCT_LIST_free((STACK_OF(SCT) *)scts); }
static inline void copenssl_BASIC_CONSTRAINTS_free_any(void *bc) { BASIC_CONSTRAINTS_free((BASIC_CONSTRAINTS *)bc); }
static inline int copenssl_BASIC_CONSTRAINTS_is_ca(const void *bc) { return ((const BASIC_CONSTRAINTS *)bc)->ca != 0; }

// MARK: Memory

static inline void copenssl_OPENSSL_free(void *p) { OPENSSL_free(p); }

// MARK: Callback setters whose C prototypes use a generic function pointer

typedef int (*copenssl_alpn_select_cb)(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                                       const unsigned char *in, unsigned int inlen, void *arg);
static inline void copenssl_SSL_CTX_set_alpn_select_cb(SSL_CTX *ctx, copenssl_alpn_select_cb cb) {
    SSL_CTX_set_alpn_select_cb(ctx, cb, NULL);
}

// MARK: Constants built from macros Swift cannot evaluate

static inline unsigned long copenssl_XN_FLAG_RFC2253(void) { return XN_FLAG_RFC2253; }
static inline uint64_t copenssl_SSL_OP_NO_TICKET(void) { return SSL_OP_NO_TICKET; }
/// Client sessions reach the new-session callback; OpenSSL keeps none in its own (server-oriented) cache.
static inline long copenssl_SSL_SESS_CACHE_CLIENT_ONLY_CALLBACK(void) {
    return SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL;
}
static inline int copenssl_MBSTRING_UTF8(void) { return MBSTRING_UTF8; }
