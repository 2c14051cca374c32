#ifndef PLAYD_CMICROHTTPD_H
#define PLAYD_CMICROHTTPD_H
// libmicrohttpd for playd's web listener (issue 44): its own header, plus the two calls
// Swift cannot make itself because they are variadic (MHD_start_daemon,
// MHD_get_connection_info).
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <microhttpd.h>

/// Starts a daemon on `addr` (IPv4 or IPv6) with a thread per connection (a waiting
/// event stream holds only its own thread) and the given caps. NULL on failure (errno).
struct MHD_Daemon *playd_http_start(const struct sockaddr *addr, socklen_t addr_len,
                                    unsigned int connection_limit, unsigned int per_ip_limit,
                                    unsigned int timeout_seconds, size_t memory_limit,
                                    MHD_AccessHandlerCallback handler, void *handler_cls,
                                    MHD_RequestCompletedCallback completed, void *completed_cls);

/// The peer's address as text ("1.2.3.4", "::1"), without the port. 0 on success.
int playd_http_peer(struct MHD_Connection *connection, char *buffer, size_t size);

#endif
