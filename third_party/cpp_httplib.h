// The only way into cpp-httplib: include this, never <httplib.h> itself.
//
// Note [httplib's build macros]
// Debian's libcpp-httplib.so is built with CPPHTTPLIB_OPENSSL_SUPPORT,
// CPPHTTPLIB_ZLIB_SUPPORT and CPPHTTPLIB_BROTLI_SUPPORT (its pkg-config
// Cflags), and those macros change the classes' layouts: with OpenSSL
// support httplib::Client holds a bool after its ClientImpl pointer, so
// the library's constructor writes 16 bytes where a caller compiled
// without the macro reserved 8. A Client on the stack (a test's status
// page check) then had its neighbour overwritten; under --config=tsan that
// was a pointer the test read next, and gossip_daemon_test crashed (SEGV
// copying a string right after its status page check). The macros are
// set here, not as the target's `defines`, so that only the files that
// include httplib see them (a `defines` change recompiles every dependent).
#ifndef SKIPSWARM_THIRD_PARTY_CPP_HTTPLIB_H_
#define SKIPSWARM_THIRD_PARTY_CPP_HTTPLIB_H_

#ifndef CPPHTTPLIB_OPENSSL_SUPPORT
#define CPPHTTPLIB_OPENSSL_SUPPORT
#endif
#ifndef CPPHTTPLIB_ZLIB_SUPPORT
#define CPPHTTPLIB_ZLIB_SUPPORT
#endif
#ifndef CPPHTTPLIB_BROTLI_SUPPORT
#define CPPHTTPLIB_BROTLI_SUPPORT
#endif

#include <httplib.h>  // IWYU pragma: export

#endif  // SKIPSWARM_THIRD_PARTY_CPP_HTTPLIB_H_
