// render-probe: an LD_PRELOAD library for RenderThreadTests. It counts what the
// render thread must never do once it is running: allocate (malloc and friends), take
// a lock (pthread mutexes and rwlocks), or write to stderr (logging). A thread counts
// from its first ppoll() while it is named "playd-render": that is the loop's first
// wait, after its buffers are set up ($RENDER_PROBE_THREAD names another thread, for
// the test's control run). The counts are printed to stderr at exit:
//   render-probe: threads=N allocations=N locks=N logs=N first=ADDRESS
// with the return address of the first offending call (0: none).
//
// Built by the test with the system's C compiler; not part of playd.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

static __thread int armed;
static char watched[16] = "playd-render";

static int want_backtrace;

__attribute__((constructor)) static void probe_init(void) {
    // $RENDER_PROBE_BACKTRACE: print the stack of the first offending call (to find
    // it: addr2line -fe BINARY OFFSET). backtrace() loads libgcc on its first call, so
    // that first call is made here.
    want_backtrace = getenv("RENDER_PROBE_BACKTRACE") != NULL;
    if (want_backtrace) { void *frames[2]; backtrace(frames, 2); }
    const char *name = getenv("RENDER_PROBE_THREAD");
    if (name && *name) { strncpy(watched, name, sizeof watched - 1); watched[sizeof watched - 1] = 0; }
}
static atomic_long threads, allocations, locks, logs;
static atomic_uintptr_t first;

static int (*real_mutex_lock)(pthread_mutex_t *);
static int (*real_mutex_trylock)(pthread_mutex_t *);
static int (*real_rdlock)(pthread_rwlock_t *);
static int (*real_wrlock)(pthread_rwlock_t *);

// The lock functions are looked up on first use (the loader and libc take locks before
// any constructor runs); ppoll and write are plain system calls here.
static void resolve(void) {
    if (real_mutex_lock) return;
    real_mutex_trylock = dlsym(RTLD_NEXT, "pthread_mutex_trylock");
    real_rdlock = dlsym(RTLD_NEXT, "pthread_rwlock_rdlock");
    real_wrlock = dlsym(RTLD_NEXT, "pthread_rwlock_wrlock");
    real_mutex_lock = dlsym(RTLD_NEXT, "pthread_mutex_lock");
}

static void note(atomic_long *counter, void *where) {
    atomic_fetch_add(counter, 1);
    uintptr_t none = 0;
    if (atomic_compare_exchange_strong(&first, &none, (uintptr_t)where) && want_backtrace) {
        void *frames[32];
        int n = backtrace(frames, 32);
        backtrace_symbols_fd(frames, n, 2);
    }
}

__attribute__((destructor)) static void probe_report(void) {
    char line[200];
    int n = snprintf(line, sizeof line, "render-probe: threads=%ld allocations=%ld locks=%ld logs=%ld first=%p\n",
                     atomic_load(&threads), atomic_load(&allocations), atomic_load(&locks), atomic_load(&logs),
                     (void *)atomic_load(&first));
    if (n > 0) syscall(SYS_write, 2, line, (size_t)n);
}

int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *t, const sigset_t *mask) {
    if (!armed) {
        char name[16] = {0};
        prctl(PR_GET_NAME, name, 0, 0, 0);
        if (strcmp(name, watched) == 0) { armed = 1; atomic_fetch_add(&threads, 1); }
    }
    return (int)syscall(SYS_ppoll, fds, n, t, mask, _NSIG / 8);
}

void *malloc(size_t size) {
    if (armed) note(&allocations, __builtin_return_address(0));
    return __libc_malloc(size);
}
void *calloc(size_t n, size_t size) {
    if (armed) note(&allocations, __builtin_return_address(0));
    return __libc_calloc(n, size);
}
void *realloc(void *p, size_t size) {
    if (armed) note(&allocations, __builtin_return_address(0));
    return __libc_realloc(p, size);
}
void *memalign(size_t align, size_t size) {
    if (armed) note(&allocations, __builtin_return_address(0));
    return __libc_memalign(align, size);
}
void *aligned_alloc(size_t align, size_t size) {
    if (armed) note(&allocations, __builtin_return_address(0));
    return __libc_memalign(align, size);
}
int posix_memalign(void **out, size_t align, size_t size) {
    if (armed) note(&allocations, __builtin_return_address(0));
    void *p = __libc_memalign(align, size);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}
// dlsym itself may lock: while resolving, locks are skipped (only the loading
// thread runs then).
static __thread int resolving;
#define FORWARD(real, arg) \
    if (!real) { if (resolving) return 0; resolving = 1; resolve(); resolving = 0; } \
    return real(arg)

int pthread_mutex_lock(pthread_mutex_t *m) {
    if (armed) note(&locks, __builtin_return_address(0));
    FORWARD(real_mutex_lock, m);
}
int pthread_mutex_trylock(pthread_mutex_t *m) {
    if (armed) note(&locks, __builtin_return_address(0));
    FORWARD(real_mutex_trylock, m);
}
int pthread_rwlock_rdlock(pthread_rwlock_t *l) {
    if (armed) note(&locks, __builtin_return_address(0));
    FORWARD(real_rdlock, l);
}
int pthread_rwlock_wrlock(pthread_rwlock_t *l) {
    if (armed) note(&locks, __builtin_return_address(0));
    FORWARD(real_wrlock, l);
}
ssize_t write(int fd, const void *buffer, size_t size) {
    if (armed && fd == 2) note(&logs, __builtin_return_address(0));
    return syscall(SYS_write, fd, buffer, size);
}
