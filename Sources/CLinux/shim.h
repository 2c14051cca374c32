// Shim for Linux calls that Glibc's Swift module does not expose.
//
// Why it exists: eventfd() lives in <sys/eventfd.h>, and ppoll(), accept4() and
// pthread_setname_np() are GNU extensions. Defining _GNU_SOURCE here would change
// glibc's struct definitions (fd_set) against Swift's own Glibc module and break a
// clean build, so the three GNU prototypes are declared below instead (glibc exports
// them unconditionally). Every symbol added here is prefixed `clinux_`.
#ifndef CLINUX_SHIM_H
#define CLINUX_SHIM_H
#include <sys/eventfd.h>
#include <poll.h>
#include <time.h>
#include <signal.h>
#include <pthread.h>
#include <sched.h>
#include <malloc.h>
#include <sys/socket.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

extern int ppoll(struct pollfd *fds, nfds_t nfds, const struct timespec *timeout, const sigset_t *sigmask);
extern int accept4(int fd, struct sockaddr *addr, socklen_t *addrlen, int flags);
extern int pthread_setname_np(pthread_t thread, const char *name);

static inline int clinux_eventfd_nonblocking(void) {
    return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
}

/// ppoll() on one descriptor for POLLIN; timeout_ns < 0 waits forever.
/// Returns 1 when readable, 0 on timeout, -errno on error.
static inline int clinux_wait_readable(int fd, long long timeout_ns) {
    struct pollfd p = { .fd = fd, .events = POLLIN, .revents = 0 };
    struct timespec ts;
    struct timespec *tp = NULL;
    if (timeout_ns >= 0) {
        ts.tv_sec = (time_t)(timeout_ns / 1000000000LL);
        ts.tv_nsec = (long)(timeout_ns % 1000000000LL);
        tp = &ts;
    }
    int r = ppoll(&p, 1, tp, NULL);
    if (r < 0) return -1;
    return (r > 0 && (p.revents & POLLIN)) ? 1 : 0;
}

/// Caps glibc's malloc arenas (mallopt(M_ARENA_MAX)). Returns 1 on success.
static inline int clinux_limit_malloc_arenas(int arenas) {
    return mallopt(M_ARENA_MAX, arenas);
}

/// Fixes glibc's mmap threshold (mallopt(M_MMAP_THRESHOLD)), which also stops glibc
/// from raising it each time a large block is freed. Returns 1 on success.
static inline int clinux_set_mmap_threshold(int bytes) {
    return mallopt(M_MMAP_THRESHOLD, bytes);
}

/// Returns free heap pages to the kernel (malloc_trim). Not real-time safe.
static inline int clinux_malloc_trim(void) {
    return malloc_trim(0);
}

/// The connected peer's pid, uid and gid (getsockopt SO_PEERCRED) on a Unix socket.
/// `struct ucred` needs _GNU_SOURCE, so its layout (pid_t, uid_t, gid_t) is spelled out.
/// Returns 0, or -1 with errno set (e.g. ENOTSOCK, or a TCP socket: no credentials).
static inline int clinux_peer_credentials(int fd, int *pid, unsigned *uid, unsigned *gid) {
    struct { pid_t pid; uid_t uid; gid_t gid; } cred;
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return -1;
    if (len != sizeof cred) return -1;
    *pid = cred.pid; *uid = cred.uid; *gid = cred.gid;
    return 0;
}

/// accept4(SOCK_NONBLOCK | SOCK_CLOEXEC), which needs _GNU_SOURCE.
static inline int clinux_accept_nonblocking(int fd) {
    return accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

/// The same, also returning the peer's address (TCP clients are logged by address).
static inline int clinux_accept_nonblocking_from(int fd, struct sockaddr *addr, socklen_t *len) {
    return accept4(fd, addr, len, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

/// Unblocks SIGTERM, SIGINT and SIGHUP in the calling thread: a process may inherit
/// a mask that blocks them (test runners, some supervisors), and then would never see
/// the signals it handles.
static inline int clinux_unblock_termination_signals(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    return pthread_sigmask(SIG_UNBLOCK, &set, NULL);
}

/// Names a thread (at most 15 bytes are kept) for ps/top/gdb.
static inline int clinux_set_thread_name(pthread_t thread, const char *name) {
    return pthread_setname_np(thread, name);
}

/// Asks for SCHED_FIFO at `priority` for the calling thread. Returns 0 or the error
/// number pthread_setschedparam() returned (EPERM when not allowed).
static inline int clinux_request_fifo(int priority) {
    struct sched_param sp = { .sched_priority = priority };
    return pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);
}
/// Lowers the calling thread's CPU priority to `nice` and its I/O class to idle
/// (Linux schedules threads individually, so this leaves the rest of the process
/// alone). For background work such as a library scan. Returns 0 or -1.
static inline int clinux_lower_thread_priority(int nice) {
    pid_t tid = (pid_t)syscall(SYS_gettid);
    int r = setpriority(PRIO_PROCESS, (id_t)tid, nice);
    // ioprio_set(IOPRIO_WHO_PROCESS = 1, tid, IOPRIO_CLASS_IDLE (3) << 13)
    long r2 = syscall(SYS_ioprio_set, 1, tid, 3 << 13);
    return (r == 0 && r2 == 0) ? 0 : -1;
}

/// Bytes waiting in a pipe or FIFO (ioctl FIONREAD, a variadic call Swift cannot make),
/// or -1.
static inline int clinux_pipe_queued(int fd) {
    int n = 0;
    return ioctl(fd, FIONREAD, &n) == 0 ? n : -1;
}
#endif
