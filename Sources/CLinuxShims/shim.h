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
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>
#include <malloc.h>

// accept4 and pipe2 are GNU extensions; declare them in case this header is parsed without _GNU_SOURCE.
extern int accept4(int sockfd, struct sockaddr *addr, socklen_t *addrlen, int flags);
extern int pipe2(int pipefd[2], int flags);

/// A close-on-exec pipe whose write end does not block. Returns 0, or -1 with errno.
static inline int clinux_signal_pipe(int fds[2]) {
    if (pipe2(fds, O_CLOEXEC) != 0) return -1;
    return fcntl(fds[1], F_SETFL, O_NONBLOCK);
}

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

/// The write end of the pipe that `clinux_signal_to_pipe` reports signals to; -1 when none. A static in a header:
/// each Swift module that calls these functions has its own copy, so only ProxyEventLoop's ShutdownSignals uses them.
static volatile int clinux_signal_pipe_fd = -1;

/// Signal handler: writes the signal's number to the pipe (write(2) is async-signal-safe; errno is preserved).
static void clinux_signal_to_pipe(int sig) {
    int saved = errno;
    unsigned char number = (unsigned char)sig;
    int fd = clinux_signal_pipe_fd;
    if (fd >= 0) {
        ssize_t written = write(fd, &number, 1);
        (void)written;  // a full pipe already holds a pending notification
    }
    errno = saved;
}

/// Reports `sig` to `fd` (a non-blocking pipe write end) from now on. sigaction takes effect before it returns, so no
/// signal sent afterwards is lost; before it, the default action applies. Returns 0, or -1 with errno.
static inline int clinux_report_signal_to_pipe(int sig, int fd) {
    clinux_signal_pipe_fd = fd;
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = clinux_signal_to_pipe;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    return sigaction(sig, &action, NULL);
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

/// glibc's malloc_trim: gives free whole pages inside every heap back to the kernel, keeping `pad` bytes at the top
/// of each; returns 1 if any memory was released.
static inline int clinux_trim_heap(size_t pad) {
    return malloc_trim(pad);
}

/// Where a TCP connection that netfilter redirected (nftables `redirect`, NAT) was going: SO_ORIGINAL_DST for
/// IPv4 (linux/netfilter_ipv4.h), IP6T_SO_ORIGINAL_DST for IPv6 (linux/netfilter_ipv6/ip6_tables.h), both 80 and
/// answered from the connection-tracking table. Returns 0, or -1 with errno (ENOENT: no tracked redirect;
/// ENOPROTOOPT: connection tracking is not loaded).
static inline int clinux_original_destination(int fd, int ipv6, struct sockaddr_storage *out, socklen_t *len) {
    return getsockopt(fd, ipv6 ? IPPROTO_IPV6 : IPPROTO_IP, 80, out, len);
}

/// A non-blocking, close-on-exec UDP socket.
static inline int clinux_udp_socket(int domain) {
    return socket(domain, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
}

/* A connected pair of local stream sockets, both non-blocking and close-on-exec. */
static inline int clinux_stream_pair(int fds[2]) {
    return socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds);
}
