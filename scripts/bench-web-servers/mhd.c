// The smallest libmicrohttpd server that answers a JSON body, set up as playd's web
// listener is (a thread per connection): the candidate measured against swift-nio for
// issue 44 by scripts/bench-web.
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static enum MHD_Result answer(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *data, size_t *size, void **ctx) {
    (void)cls; (void)url; (void)method; (void)version; (void)data;
    if (*ctx == NULL) { *ctx = (void *)1; return MHD_YES; }
    if (*size) { *size = 0; return MHD_YES; }
    static const char body[] = "{\"ok\":true,\"pong\":true}";
    struct MHD_Response *r = MHD_create_response_from_buffer(sizeof body - 1, (void *)body, MHD_RESPMEM_PERSISTENT);
    MHD_add_response_header(r, "Content-Type", "application/json");
    enum MHD_Result ok = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    return ok;
}

int main(int argc, char **argv) {
    unsigned short port = argc > 1 ? (unsigned short)atoi(argv[1]) : 8098;
    struct MHD_Daemon *d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION, port, NULL, NULL,
                                            answer, NULL, MHD_OPTION_CONNECTION_LIMIT, 100u, MHD_OPTION_END);
    if (!d) { perror("MHD_start_daemon"); return 1; }
    pause();
    return 0;
}
