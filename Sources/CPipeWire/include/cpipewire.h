#ifndef PLAYD_CPIPEWIRE_H
#define PLAYD_CPIPEWIRE_H
// playd's native PipeWire output (issue 46): one pw_stream on libpipewire's thread loop,
// fed from the render thread through a ring of its own.
//
// How the two threads meet: the render thread (the only producer of samples) writes
// into the ring; PipeWire's data thread (the stream's process callback, flag
// RT_PROCESS) copies from it into the graph's buffer. They share three 64-bit frame
// counters and an eventfd, nothing else: no lock, no allocation on either side. The
// render thread may take back frames the callback has not claimed (a pause, a seek),
// by a store-then-load handshake on `write` and `claim` (see cpipewire.c). A format
// switch (control side) swaps the ring behind a gate the callback checks first.
//
// Everything else (connect, stream properties, volume) runs on the control side under
// the thread loop's lock, which the render thread never takes.
#include <stddef.h>
#include <stdint.h>

typedef struct playd_pw playd_pw;

enum { PLAYD_PW_F32 = 0, PLAYD_PW_S32 = 1, PLAYD_PW_S16 = 2 };

/// True when a PipeWire server answers for this user (its socket exists and a
/// connection succeeds). Control side.
int playd_pw_available(void);

/// Connects to the server, starting the thread loop. `target` names a node (NULL or ""
/// for the default sink); `remote` is the server's socket, a name in the runtime folder
/// or an absolute path (NULL or "": PIPEWIRE_REMOTE, else pipewire-0). NULL on failure,
/// with the reason in `error`. Control side.
playd_pw *playd_pw_new(const char *target, const char *remote, char *error, size_t error_size);
void playd_pw_free(playd_pw *o);

/// Makes the stream run at `rate`/`channels`/`format` with a ring of `ring_frames`:
/// the stream made at the first open is kept (a close only deactivates it; another
/// format is switched in place, on the same node). Negative errno on failure, with the
/// reason in `error`.
/// Control side, with the render thread stopped.
int playd_pw_open(playd_pw *o, uint32_t rate, uint32_t channels, int format,
                  uint32_t ring_frames, char *error, size_t error_size);
/// Deactivates the stream and empties the ring. Control side, render thread stopped.
void playd_pw_close(playd_pw *o);
/// Zero while the stream is usable; a negative errno once the server or the stream
/// failed (then open again, which reconnects). Any thread.
int playd_pw_error(playd_pw *o);

// The render thread's calls: no lock, no allocation.
long playd_pw_writable(playd_pw *o);
long playd_pw_write(playd_pw *o, const void *samples, long frames);
/// Frames in the ring plus the graph's delay to the device.
long playd_pw_delay(playd_pw *o);
long playd_pw_rewindable(playd_pw *o);
long playd_pw_rewind(playd_pw *o, long frames);
/// Arms the eventfd for `frames` writable and returns it (poll it for POLLIN, then
/// playd_pw_disarm). Returns -1 when that many are writable already.
int playd_pw_arm(playd_pw *o, long frames);
void playd_pw_disarm(playd_pw *o);
/// Frames of silence the callback sent because the ring was empty while it held audio
/// before (underruns).
uint64_t playd_pw_underruns(playd_pw *o);

/// The stream's properties for what plays (shown by pw-dump and desktop mixers). NULL
/// fields are left out. Control side.
void playd_pw_set_media(playd_pw *o, const char *artist, const char *title, const char *album);
/// The stream's own volume (0…1, cubic as mixers show it is not applied: linear).
/// Control side. Negative errno on failure.
int playd_pw_set_volume(playd_pw *o, float volume);
/// The node id of the stream (for reports), or -1.
int playd_pw_node_id(playd_pw *o);

#endif
