// Publishing a service over Zeroconf (mDNS/DNS-SD) through Avahi, loaded at run time.
//
// Why dlopen: Avahi is optional. A box without libavahi-client3 (or without a running
// avahi-daemon) must still run playd, so the library is not linked: czc_publish()
// loads libavahi-client.so.3 and libavahi-common.so.3 itself and says why when it
// cannot. Everything Avahi does runs on its own thread (avahi_threaded_poll); the
// state is read with atomics, so the control thread never waits on it.
#ifndef CZEROCONF_H
#define CZEROCONF_H
#include <stddef.h>
#include <stdint.h>

typedef struct czc_publisher czc_publisher;

/// Where a publication stands.
enum {
    CZC_WAITING = 0,      // no avahi-daemon yet: published when one appears
    CZC_REGISTERING = 1,
    CZC_ESTABLISHED = 2,  // announced under czc_name()
    CZC_FAILED = -1,      // see czc_error()
};

/// Starts publishing NAME (UTF-8, at most 63 bytes) as TYPE (e.g. "_mpd._tcp") on
/// PORT, on every interface. NULL when Avahi cannot be used at all (library missing,
/// no D-Bus system bus): ERR gets why.
czc_publisher *czc_publish(const char *name, const char *type, uint16_t port, char *err, size_t errlen);
/// The current state (CZC_*).
int czc_state(czc_publisher *p);
/// The name announced (another one after a collision: "NAME #2"), into BUF.
void czc_name(czc_publisher *p, char *buf, size_t len);
/// The last error, into BUF ("" if none).
void czc_error(czc_publisher *p, char *buf, size_t len);
/// Withdraws the service and frees everything.
void czc_stop(czc_publisher *p);

#endif
