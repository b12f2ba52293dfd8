// Linux headers that the Swift Glibc module does not export (epoll, eventfd, timerfd, mallopt), plus small inline
// helpers whose flag arguments are awkward enum types in Swift (SOCK_* / MSG_*). Prefix: clinux_.
#pragma once
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <unistd.h>
#include <malloc.h>

// accept4 is a GNU extension; declare it in case this header is parsed without _GNU_SOURCE.
extern int accept4(int sockfd, struct sockaddr *addr, socklen_t *addrlen, int flags);

/// A non-blocking, close-on-exec TCP socket.
static inline int clinux_tcp_socket(int domain) {
    return socket(domain, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
}

/// accept4 returning a non-blocking, close-on-exec socket.
static inline int clinux_accept(int fd, struct sockaddr *addr, socklen_t *len) {
    return accept4(fd, addr, len, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

/// send(2) that never raises SIGPIPE.
static inline ssize_t clinux_send(int fd, const void *buf, size_t len) {
    return send(fd, buf, len, MSG_NOSIGNAL);
}

/// Ignores SIGPIPE for the whole process (writes to a closed peer then fail with EPIPE instead of killing us).
static inline void clinux_ignore_sigpipe(void) {
    signal(SIGPIPE, SIG_IGN);
}

/// Ignores a signal so that a DispatchSource can observe it instead of the default action.
static inline void clinux_ignore_signal(int sig) {
    signal(sig, SIG_IGN);
}

/// Restores the default action of a signal.
static inline void clinux_default_signal(int sig) {
    signal(sig, SIG_DFL);
}

static inline int clinux_errno(void) { return errno; }

/// glibc allocator thresholds (mallopt's M_TRIM_THRESHOLD and M_MMAP_THRESHOLD); returns 1 when both were set.
static inline int clinux_set_heap_thresholds(int trim, int mmap_threshold) {
    return mallopt(M_TRIM_THRESHOLD, trim) == 1 && mallopt(M_MMAP_THRESHOLD, mmap_threshold) == 1;
}
