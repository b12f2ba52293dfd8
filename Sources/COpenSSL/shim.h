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
