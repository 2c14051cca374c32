// See czeroconf.h. The Avahi declarations below are the few this file uses, copied by
// value from Avahi 0.8's public headers (the ABI of libavahi-client.so.3 has not
// changed since 2006); no Avahi header is needed to build.
#include "czeroconf.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct AvahiThreadedPoll AvahiThreadedPoll;
typedef struct AvahiPoll AvahiPoll;
typedef struct AvahiClient AvahiClient;
typedef struct AvahiEntryGroup AvahiEntryGroup;
typedef void (*AvahiClientCallback)(AvahiClient *, int state, void *userdata);
typedef void (*AvahiEntryGroupCallback)(AvahiEntryGroup *, int state, void *userdata);

enum { AVAHI_CLIENT_S_REGISTERING = 1, AVAHI_CLIENT_S_RUNNING = 2, AVAHI_CLIENT_S_COLLISION = 3,
       AVAHI_CLIENT_FAILURE = 100, AVAHI_CLIENT_CONNECTING = 101 };
enum { AVAHI_ENTRY_GROUP_UNCOMMITED = 0, AVAHI_ENTRY_GROUP_REGISTERING = 1, AVAHI_ENTRY_GROUP_ESTABLISHED = 2,
       AVAHI_ENTRY_GROUP_COLLISION = 3, AVAHI_ENTRY_GROUP_FAILURE = 4 };
enum { AVAHI_CLIENT_NO_FAIL = 2 };
enum { AVAHI_IF_UNSPEC = -1, AVAHI_PROTO_UNSPEC = -1 };
enum { AVAHI_ERR_COLLISION = -8 };

static struct {
    int loaded;
    AvahiThreadedPoll *(*threaded_poll_new)(void);
    const AvahiPoll *(*threaded_poll_get)(AvahiThreadedPoll *);
    int (*threaded_poll_start)(AvahiThreadedPoll *);
    int (*threaded_poll_stop)(AvahiThreadedPoll *);
    void (*threaded_poll_free)(AvahiThreadedPoll *);
    void (*threaded_poll_lock)(AvahiThreadedPoll *);
    void (*threaded_poll_unlock)(AvahiThreadedPoll *);
    const char *(*strerror)(int);
    char *(*alternative_service_name)(const char *);
    void (*free)(void *);
    AvahiClient *(*client_new)(const AvahiPoll *, int flags, AvahiClientCallback, void *, int *error);
    void (*client_free)(AvahiClient *);
    int (*client_errno)(AvahiClient *);
    AvahiEntryGroup *(*entry_group_new)(AvahiClient *, AvahiEntryGroupCallback, void *);
    int (*entry_group_add_service)(AvahiEntryGroup *, int iface, int proto, int flags, const char *name,
                                   const char *type, const char *domain, const char *host, uint16_t port, ...);
    int (*entry_group_commit)(AvahiEntryGroup *);
    int (*entry_group_reset)(AvahiEntryGroup *);
    int (*entry_group_is_empty)(AvahiEntryGroup *);
} av;
static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;

static int load(char *err, size_t errlen) {
    pthread_mutex_lock(&load_lock);
    int ok = av.loaded;
    if (!ok) {
        void *common = dlopen("libavahi-common.so.3", RTLD_NOW | RTLD_LOCAL);
        void *client = common ? dlopen("libavahi-client.so.3", RTLD_NOW | RTLD_LOCAL) : NULL;
        if (!client) {
            snprintf(err, errlen, "cannot load Avahi (libavahi-client3): %s", dlerror());
        } else {
            ok = 1;
#define SYM(lib, field, name) do { *(void **)&av.field = dlsym(lib, name); if (!av.field) { ok = 0; snprintf(err, errlen, "Avahi lacks %s", name); } } while (0)
            SYM(common, threaded_poll_new, "avahi_threaded_poll_new");
            SYM(common, threaded_poll_get, "avahi_threaded_poll_get");
            SYM(common, threaded_poll_start, "avahi_threaded_poll_start");
            SYM(common, threaded_poll_stop, "avahi_threaded_poll_stop");
            SYM(common, threaded_poll_free, "avahi_threaded_poll_free");
            SYM(common, threaded_poll_lock, "avahi_threaded_poll_lock");
            SYM(common, threaded_poll_unlock, "avahi_threaded_poll_unlock");
            SYM(common, strerror, "avahi_strerror");
            SYM(common, alternative_service_name, "avahi_alternative_service_name");
            SYM(common, free, "avahi_free");
            SYM(client, client_new, "avahi_client_new");
            SYM(client, client_free, "avahi_client_free");
            SYM(client, client_errno, "avahi_client_errno");
            SYM(client, entry_group_new, "avahi_entry_group_new");
            SYM(client, entry_group_add_service, "avahi_entry_group_add_service");
            SYM(client, entry_group_commit, "avahi_entry_group_commit");
            SYM(client, entry_group_reset, "avahi_entry_group_reset");
            SYM(client, entry_group_is_empty, "avahi_entry_group_is_empty");
#undef SYM
        }
        av.loaded = ok;
    }
    pthread_mutex_unlock(&load_lock);
    return ok;
}

struct czc_publisher {
    AvahiThreadedPoll *poll;
    AvahiClient *client;        // written on the Avahi thread (or before it starts)
    AvahiEntryGroup *group;     // Avahi thread only
    char type[64];
    uint16_t port;
    // `name` and `error` are written on the Avahi thread, read by czc_name/czc_error
    // under the poll's lock (avahi_threaded_poll_lock), which the Avahi thread holds
    // whenever it runs a callback.
    char name[64];
    char error[160];
    _Atomic int state;
};

static void create_services(czc_publisher *p, AvahiClient *c);

static void group_callback(AvahiEntryGroup *g, int state, void *userdata) {
    czc_publisher *p = userdata;
    switch (state) {
    case AVAHI_ENTRY_GROUP_ESTABLISHED:
        atomic_store(&p->state, CZC_ESTABLISHED);
        break;
    case AVAHI_ENTRY_GROUP_COLLISION: {
        // Another service has the name on the network: "NAME #2", as MPD does.
        char *alt = av.alternative_service_name(p->name);
        snprintf(p->name, sizeof p->name, "%s", alt);
        av.free(alt);
        create_services(p, NULL);
        break;
    }
    case AVAHI_ENTRY_GROUP_FAILURE:
        snprintf(p->error, sizeof p->error, "%s", av.strerror(p->client ? av.client_errno(p->client) : 0));
        atomic_store(&p->state, CZC_FAILED);
        break;
    default:
        break;
    }
    (void)g;
}

static void create_services(czc_publisher *p, AvahiClient *c) {
    if (c) p->client = c;
    if (!p->group) p->group = av.entry_group_new(p->client, group_callback, p);
    if (!p->group) {
        snprintf(p->error, sizeof p->error, "avahi_entry_group_new: %s", av.strerror(av.client_errno(p->client)));
        atomic_store(&p->state, CZC_FAILED);
        return;
    }
    av.entry_group_reset(p->group);
    for (int tries = 0; tries < 16; tries++) {
        int r = av.entry_group_add_service(p->group, AVAHI_IF_UNSPEC, AVAHI_PROTO_UNSPEC, 0, p->name, p->type,
                                           NULL, NULL, p->port, NULL);
        if (r == AVAHI_ERR_COLLISION) {
            char *alt = av.alternative_service_name(p->name);
            snprintf(p->name, sizeof p->name, "%s", alt);
            av.free(alt);
            continue;
        }
        if (r < 0 || (r = av.entry_group_commit(p->group)) < 0) {
            snprintf(p->error, sizeof p->error, "%s", av.strerror(r));
            atomic_store(&p->state, CZC_FAILED);
            return;
        }
        atomic_store(&p->state, CZC_REGISTERING);
        return;
    }
}

static void client_callback(AvahiClient *c, int state, void *userdata) {
    czc_publisher *p = userdata;
    switch (state) {
    case AVAHI_CLIENT_S_RUNNING:
        create_services(p, c);
        break;
    case AVAHI_CLIENT_S_COLLISION:
    case AVAHI_CLIENT_S_REGISTERING:
        // The host name changes: the service is announced again once running.
        if (p->group) av.entry_group_reset(p->group);
        atomic_store(&p->state, CZC_REGISTERING);
        break;
    case AVAHI_CLIENT_CONNECTING:
        // No daemon (yet): NO_FAIL waits for one to appear on the bus.
        atomic_store(&p->state, CZC_WAITING);
        break;
    case AVAHI_CLIENT_FAILURE:
        snprintf(p->error, sizeof p->error, "%s", av.strerror(av.client_errno(c)));
        atomic_store(&p->state, CZC_FAILED);
        break;
    }
}

czc_publisher *czc_publish(const char *name, const char *type, uint16_t port, char *err, size_t errlen) {
    if (!load(err, errlen)) return NULL;
    czc_publisher *p = calloc(1, sizeof *p);
    if (!p) { snprintf(err, errlen, "out of memory"); return NULL; }
    snprintf(p->name, sizeof p->name, "%s", name);
    snprintf(p->type, sizeof p->type, "%s", type);
    p->port = port;
    atomic_store(&p->state, CZC_WAITING);
    p->poll = av.threaded_poll_new();
    if (!p->poll) { snprintf(err, errlen, "avahi_threaded_poll_new failed"); free(p); return NULL; }
    int error = 0;
    // The callback may run inside avahi_client_new (before it returns), on this thread.
    p->client = av.client_new(av.threaded_poll_get(p->poll), AVAHI_CLIENT_NO_FAIL, client_callback, p, &error);
    if (!p->client) {
        snprintf(err, errlen, "%s", av.strerror(error));
        av.threaded_poll_free(p->poll);
        free(p);
        return NULL;
    }
    if (av.threaded_poll_start(p->poll) < 0) {
        snprintf(err, errlen, "avahi_threaded_poll_start failed");
        av.client_free(p->client);
        av.threaded_poll_free(p->poll);
        free(p);
        return NULL;
    }
    return p;
}

int czc_state(czc_publisher *p) { return atomic_load(&p->state); }

void czc_name(czc_publisher *p, char *buf, size_t len) {
    av.threaded_poll_lock(p->poll);
    snprintf(buf, len, "%s", p->name);
    av.threaded_poll_unlock(p->poll);
}

void czc_error(czc_publisher *p, char *buf, size_t len) {
    av.threaded_poll_lock(p->poll);
    snprintf(buf, len, "%s", p->error);
    av.threaded_poll_unlock(p->poll);
}

void czc_stop(czc_publisher *p) {
    if (!p) return;
    av.threaded_poll_stop(p->poll);
    // Freeing the client frees its entry groups and withdraws the service.
    av.client_free(p->client);
    av.threaded_poll_free(p->poll);
    free(p);
}
