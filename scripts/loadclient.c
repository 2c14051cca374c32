// The control-load client of scripts/bench-control (issue 25): N connections to one
// daemon, each asking for its status over and over, timed per request. Native, single
// threaded, epoll: the Python client it replaces ran 50 threads under one interpreter
// lock and measured its own queueing (its 50-client p99 was 7–8 ms for both playd
// and mpv).
//
//   loadclient --unix PATH | --tcp HOST:PORT  --proto json|mpd|mpv
//              [--clients N] [--requests N] [--rate HZ] [--seed N]
//
// --proto: json — playd's control socket, {"id":k,"cmd":"status"} → one line with "id":k;
//          mpd  — MPD's protocol (playd's listener or MPD), status → lines up to OK;
//          mpv  — mpv's JSON IPC, get_property time-pos → the line with "request_id":k
//                 (mpv sends events to every client: other lines are skipped).
// --rate HZ: each client asks HZ times a second, at random phases (open loop: a poll,
//          as Home Assistant and phone apps do); 0 (the default) asks again as soon as
//          the answer is in (closed loop: the daemon's throughput).
// --requests: per client (default 200). Prints one line:
//   clients=N requests=R p50_ms=… p99_ms=… max_ms=… seconds=… per_second=…
// Exits 1 on a refused connection, an ACK or error reply, or a connection that closes.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

enum proto { JSON, MPD, MPV };

struct conn {
    int fd;
    int greeted;          // MPD: the "OK MPD x.y.z" line has been read
    int waiting;          // a request is out
    uint64_t sent_ns;     // when it went out
    uint64_t due_ns;      // open loop: when the next one is due
    long next_id;
    int done;             // requests answered
    char buf[65536];
    size_t len;
};

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void die(const char *what) { perror(what); exit(1); }

static int connect_to(const char *unix_path, const char *tcp) {
    int fd;
    if (unix_path) {
        struct sockaddr_un a = { .sun_family = AF_UNIX };
        if (strlen(unix_path) >= sizeof a.sun_path) { fprintf(stderr, "socket path too long\n"); exit(2); }
        strcpy(a.sun_path, unix_path);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) die("socket");
        if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) die("connect");
    } else {
        char host[256];
        const char *colon = strrchr(tcp, ':');
        if (!colon || (size_t)(colon - tcp) >= sizeof host) { fprintf(stderr, "--tcp HOST:PORT\n"); exit(2); }
        memcpy(host, tcp, (size_t)(colon - tcp));
        host[colon - tcp] = 0;
        struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai;
        if (getaddrinfo(host, colon + 1, &hints, &ai) != 0) { fprintf(stderr, "cannot resolve %s\n", tcp); exit(1); }
        fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) die("socket");
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) die("connect");
        freeaddrinfo(ai);
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, 1 /* TCP_NODELAY */, &one, sizeof one);
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    return fd;
}

static void send_request(struct conn *c, enum proto p) {
    char req[160];
    int n;
    c->next_id++;
    switch (p) {
    case JSON: n = snprintf(req, sizeof req, "{\"id\":%ld,\"cmd\":\"status\"}\n", c->next_id); break;
    case MPD: n = snprintf(req, sizeof req, "status\n"); break;
    default: n = snprintf(req, sizeof req, "{\"command\":[\"get_property\",\"time-pos\"],\"request_id\":%ld}\n", c->next_id); break;
    }
    c->sent_ns = now_ns();
    // Requests are short and the socket buffer empty between them: one write.
    if (write(c->fd, req, (size_t)n) != n) die("write");
    c->waiting = 1;
}

// Whether `line` holds `key` followed by exactly `id` (not a longer number).
static int has_id(const char *line, const char *key, long id) {
    size_t k = strlen(key);
    for (const char *at = strstr(line, key); at; at = strstr(at + 1, key)) {
        char *end;
        const char *v = at + k;
        while (*v == ' ') v++;
        if (strtol(v, &end, 10) == id && end != v) return 1;
    }
    return 0;
}

// Whether the buffered lines complete the outstanding request; consumes what it reads.
static int take_reply(struct conn *c, enum proto p) {
    int complete = 0;
    char *start = c->buf, *end = c->buf + c->len, *nl;
    while (!complete && (nl = memchr(start, '\n', (size_t)(end - start)))) {
        *nl = 0;
        if (p == MPD) {
            if (!c->greeted) {
                if (strncmp(start, "OK MPD ", 7) != 0) { fprintf(stderr, "not an MPD greeting: %s\n", start); exit(1); }
                c->greeted = 1;
            } else if (strcmp(start, "OK") == 0) {
                complete = 1;
            } else if (strncmp(start, "ACK ", 4) == 0) {
                fprintf(stderr, "error reply: %s\n", start); exit(1);
            }
        } else {
            if (has_id(start, p == JSON ? "\"id\":" : "\"request_id\":", c->next_id)) {
                int failed = p == JSON ? strstr(start, "\"ok\":false") != NULL : strstr(start, "\"error\":\"success\"") == NULL;
                if (failed) { fprintf(stderr, "error reply: %s\n", start); exit(1); }
                complete = 1;
            }
        }
        start = nl + 1;
    }
    c->len = (size_t)(end - start);
    memmove(c->buf, start, c->len);
    if (c->len == sizeof c->buf) { fprintf(stderr, "a reply line over 64 KiB\n"); exit(1); }
    return complete;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    const char *unix_path = NULL, *tcp = NULL;
    enum proto p = JSON;
    int clients = 1, requests = 200;
    double rate = 0;
    unsigned seed = 1;
    for (int i = 1; i < argc; i += 2) {  // --flag value pairs
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) { fprintf(stderr, "%s needs a value\n", a); return 2; }
        if (!strcmp(a, "--unix")) unix_path = v;
        else if (!strcmp(a, "--tcp")) tcp = v;
        else if (!strcmp(a, "--proto")) p = !strcmp(v, "mpd") ? MPD : !strcmp(v, "mpv") ? MPV : JSON;
        else if (!strcmp(a, "--clients")) clients = atoi(v);
        else if (!strcmp(a, "--requests")) requests = atoi(v);
        else if (!strcmp(a, "--rate")) rate = atof(v);
        else if (!strcmp(a, "--seed")) seed = (unsigned)atoi(v);
        else { fprintf(stderr, "unknown argument %s\n", a); return 2; }
    }
    if ((!unix_path) == (!tcp) || clients < 1 || clients > 10000 || requests < 1 || requests > 1000000 || rate < 0) {
        fprintf(stderr, "usage: loadclient --unix PATH | --tcp HOST:PORT --proto json|mpd|mpv [--clients N] [--requests N] [--rate HZ]\n");
        return 2;
    }
    srand(seed);
    uint64_t period = rate > 0 ? (uint64_t)(1e9 / rate) : 0;
    struct conn *cs = calloc((size_t)clients, sizeof *cs);
    uint64_t *lat = malloc(sizeof(uint64_t) * (size_t)clients * (size_t)requests);
    if (!cs || !lat) die("malloc");
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) die("epoll_create1");
    for (int i = 0; i < clients; i++) {
        cs[i].fd = connect_to(unix_path, tcp);
        struct epoll_event e = { .events = EPOLLIN, .data.u32 = (uint32_t)i };
        if (epoll_ctl(ep, EPOLL_CTL_ADD, cs[i].fd, &e) < 0) die("epoll_ctl");
    }
    size_t count = 0, total = (size_t)clients * (size_t)requests;
    uint64_t t0 = now_ns();
    for (int i = 0; i < clients; i++) {
        cs[i].due_ns = t0 + (period ? (uint64_t)rand() % period : 0);
        if (p != MPD && !period) send_request(&cs[i], p);  // MPD: after its greeting
    }
    struct epoll_event evs[256];
    while (count < total) {
        // Open loop: send what is due; wait until the next is due (or a reply).
        int timeout = -1;
        uint64_t now = now_ns();
        for (int i = 0; i < clients; i++) {
            struct conn *c = &cs[i];
            if (c->waiting || c->done >= requests || (p == MPD && !c->greeted)) continue;
            if (!period || c->due_ns <= now) {
                send_request(c, p);
                c->due_ns += period;
                if (c->due_ns < now) c->due_ns = now + period;  // late: do not burst
            } else {
                int ms = (int)((c->due_ns - now + 999999) / 1000000);
                if (timeout < 0 || ms < timeout) timeout = ms;
            }
        }
        int n = epoll_wait(ep, evs, 256, timeout);
        if (n < 0) { if (errno == EINTR) continue; die("epoll_wait"); }
        for (int k = 0; k < n; k++) {
            struct conn *c = &cs[evs[k].data.u32];
            for (;;) {
                ssize_t r = read(c->fd, c->buf + c->len, sizeof c->buf - c->len);
                if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
                if (r < 0) die("read");
                if (r == 0) { fprintf(stderr, "a connection closed after %d replies\n", c->done); return 1; }
                c->len += (size_t)r;
                int was_greeted = c->greeted;
                if (take_reply(c, p) && c->waiting) {
                    lat[count++] = now_ns() - c->sent_ns;
                    c->waiting = 0;
                    c->done++;
                    if (!period && c->done < requests) send_request(c, p);
                } else if (p == MPD && !was_greeted && c->greeted && !period) {
                    send_request(c, p);
                }
            }
        }
    }
    double seconds = (double)(now_ns() - t0) / 1e9;
    qsort(lat, count, sizeof *lat, cmp_u64);
    #define PCT(q) ((double)lat[(size_t)((double)(count - 1) * (q) + 0.5)] / 1e6)
    printf("clients=%d requests=%zu p50_ms=%.3f p99_ms=%.3f max_ms=%.3f seconds=%.2f per_second=%.0f\n",
           clients, count, PCT(0.50), PCT(0.99), (double)lat[count - 1] / 1e6, seconds, (double)count / seconds);
    return 0;
}
