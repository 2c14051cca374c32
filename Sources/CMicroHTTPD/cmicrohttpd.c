#include "cmicrohttpd.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

// Each connection's kernel send buffer is capped at 64 KiB (Linux doubles it): a
// listener that stops reading is then held by its bounded queue in the daemon, which
// drops it, instead of by megabytes of loopback autotuning (issue 45), and a slow
// phone's backlog stays short.
static void on_connection(void *cls, struct MHD_Connection *connection, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
    (void)cls; (void)socket_context;
    if (code != MHD_CONNECTION_NOTIFY_STARTED) return;
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (info == NULL) return;
    int size = 64 * 1024;
    setsockopt(info->connect_fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
}

struct MHD_Daemon *playd_http_start(const struct sockaddr *addr, socklen_t addr_len,
                                    unsigned int connection_limit, unsigned int per_ip_limit,
                                    unsigned int timeout_seconds, size_t memory_limit,
                                    MHD_AccessHandlerCallback handler, void *handler_cls,
                                    MHD_RequestCompletedCallback completed, void *completed_cls) {
    (void)addr_len;
    unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION;
    uint16_t port;
    if (addr->sa_family == AF_INET6) {
        flags |= MHD_USE_IPv6;
        port = ntohs(((const struct sockaddr_in6 *)addr)->sin6_port);
    } else {
        port = ntohs(((const struct sockaddr_in *)addr)->sin_port);
    }
    return MHD_start_daemon(flags, port, NULL, NULL, handler, handler_cls,
                            MHD_OPTION_SOCK_ADDR, addr,
                            MHD_OPTION_CONNECTION_LIMIT, connection_limit,
                            MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_ip_limit,
                            MHD_OPTION_CONNECTION_TIMEOUT, timeout_seconds,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, memory_limit,
                            MHD_OPTION_NOTIFY_COMPLETED, completed, completed_cls,
                            MHD_OPTION_NOTIFY_CONNECTION, on_connection, NULL,
                            /* No MHD_OPTION_LISTENING_ADDRESS_REUSE: its 1 is SO_REUSEPORT,
                             * with which a second daemon of the same user bound the same
                             * port and the kernel split the clients between the two. The
                             * default (SO_REUSEADDR) still lets a restart bind at once. */
                            MHD_OPTION_END);
}

int playd_http_peer(struct MHD_Connection *connection, char *buffer, size_t size) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (info == NULL || info->client_addr == NULL || size == 0) return -1;
    const struct sockaddr *sa = info->client_addr;
    const void *src = sa->sa_family == AF_INET6 ? (const void *)&((const struct sockaddr_in6 *)sa)->sin6_addr
                                                : (const void *)&((const struct sockaddr_in *)sa)->sin_addr;
    return inet_ntop(sa->sa_family, src, buffer, (socklen_t)size) ? 0 : -1;
}
