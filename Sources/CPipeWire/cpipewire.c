// playd's native PipeWire output: see include/cpipewire.h for how the threads meet.
#include "cpipewire.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <pipewire/pipewire.h>
#include <spa/param/audio/format-utils.h>
#include <spa/param/props.h>

struct playd_pw {
    // Control side (under the thread loop's lock once the loop runs).
    struct pw_thread_loop *loop;
    struct pw_context *context;
    struct pw_core *core;
    struct spa_hook core_listener;
    struct pw_stream *stream;
    struct spa_hook stream_listener;
    char target[256];
    char artist[256], title[256], album[256];
    uint32_t rate, channels;
    int format;
    int connected;  // the stream reached PAUSED or STREAMING since it was made
    float volume;   // the stream's own volume (amplitude), applied to each new stream

    // The ring. `ring`, `ring_frames` and `stride` change only in open, while no
    // stream exists (its process callback cannot run).
    uint8_t *ring;
    uint64_t ring_frames;
    uint32_t stride;
    // Frame counters, all monotonic. `write`: render thread. `claim` and `read`: the
    // process callback (claim = how far the callback in progress will copy, read = how
    // far it has copied).
    _Atomic uint64_t write;
    _Atomic uint64_t claim;
    _Atomic uint64_t read;
    // Frames the render thread waits for (0: not waiting). Render thread arms it, the
    // callback clears it when it signals `efd`.
    _Atomic uint64_t want;
    // Graph delay to the device in frames at the stream's rate. Written by the callback.
    _Atomic int64_t graph_delay;
    // CLOCK_MONOTONIC time by which the last frame the callback sent is heard (the
    // graph's delay after it). Written by the callback.
    _Atomic int64_t heard_by_ns;
    _Atomic uint64_t underruns;
    // 0, or the negative errno the server or stream failed with. Loop thread writes.
    _Atomic int error;
    int efd;
    // A format change swaps the ring under a live stream: the control side sets `gate`
    // and waits until `inside` (the callback running) is 0; a callback that sees the
    // gate sends silence without touching the ring. Store-then-load on both sides.
    _Atomic int gate;
    _Atomic int inside;
    // The core's answer to a sync (loop thread writes, control side reads, both under
    // the loop's lock).
    int synced_seq;
};

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static void init_library(void) { pw_init(NULL, NULL); }

static void set_error(char *error, size_t size, const char *what, int err) {
    if (error && size) snprintf(error, size, "%s: %s", what, strerror(err < 0 ? -err : err));
}

static void fail(struct playd_pw *o, int err) {
    int expected = 0;
    atomic_compare_exchange_strong(&o->error, &expected, err);
    uint64_t one = 1;
    // Wakes a render thread waiting in poll so it sees the error now.
    (void)!write(o->efd, &one, sizeof one);
    pw_thread_loop_signal(o->loop, false);
}

static void on_core_error(void *data, uint32_t id, int seq, int res, const char *message) {
    struct playd_pw *o = data;
    (void)seq; (void)message;
    // EPIPE on the core: the server went away (killed, restarted).
    if (id == PW_ID_CORE && res == -EPIPE) fail(o, -ENODEV);
}

static void on_core_done(void *data, uint32_t id, int seq) {
    struct playd_pw *o = data;
    if (id == PW_ID_CORE) { o->synced_seq = seq; pw_thread_loop_signal(o->loop, false); }
}

static const struct pw_core_events core_events = {
    PW_VERSION_CORE_EVENTS,
    .done = on_core_done,
    .error = on_core_error,
};

// Waits (at most 2 s) until the server has handled every message sent before. Under
// the loop's lock.
static void roundtrip(playd_pw *o) {
    int seq = pw_core_sync(o->core, PW_ID_CORE, 0);
    for (int timeouts = 0; o->synced_seq != seq && timeouts < 2 && !atomic_load(&o->error);) {
        if (pw_thread_loop_timed_wait(o->loop, 1) == ETIMEDOUT) timeouts++;
    }
}

static void on_state_changed(void *data, enum pw_stream_state old, enum pw_stream_state state, const char *message) {
    struct playd_pw *o = data;
    (void)old; (void)message;
    if (state == PW_STREAM_STATE_PAUSED || state == PW_STREAM_STATE_STREAMING) o->connected = 1;
    if (state == PW_STREAM_STATE_ERROR) fail(o, -EIO);
    else if (state == PW_STREAM_STATE_UNCONNECTED && o->connected) fail(o, -ENODEV);
    pw_thread_loop_signal(o->loop, false);
}

static inline uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }

// The data thread (RT_PROCESS): copies what the ring holds into the graph's buffer,
// silence for the rest.
static void process(struct playd_pw *o);

static void on_process(void *data) {
    struct playd_pw *o = data;
    atomic_store(&o->inside, 1);
    if (!atomic_load(&o->gate)) process(o);
    atomic_store(&o->inside, 0);
}

static void process(struct playd_pw *o) {
    struct pw_buffer *b = pw_stream_dequeue_buffer(o->stream);
    if (!b) return;
    struct spa_data *d = &b->buffer->datas[0];
    uint8_t *dst = d->data;
    uint32_t stride = o->stride;
    if (!dst || stride == 0) { pw_stream_queue_buffer(o->stream, b); return; }
    uint64_t max = d->maxsize / stride;
    uint64_t want = b->requested ? min_u64(b->requested, max) : max;

    // Claim [r, r + n): store the claim, then check the render thread has not taken
    // back part of it meanwhile (it stores `write`, then loads `claim`; sequentially
    // consistent on both sides, so one of the two sees the other).
    uint64_t r = atomic_load_explicit(&o->read, memory_order_relaxed);
    uint64_t n;
    for (;;) {
        uint64_t w = atomic_load(&o->write);
        n = min_u64(w - r, want);
        atomic_store(&o->claim, r + n);
        if (atomic_load(&o->write) >= r + n) break;
    }
    uint64_t slot = r % o->ring_frames;
    uint64_t first = min_u64(n, o->ring_frames - slot);
    memcpy(dst, o->ring + slot * stride, first * stride);
    if (n > first) memcpy(dst + first * stride, o->ring, (n - first) * stride);
    if (n < want) {
        memset(dst + n * stride, 0, (want - n) * stride);
        if (n > 0) atomic_fetch_add_explicit(&o->underruns, 1, memory_order_relaxed);
    }
    atomic_store(&o->read, r + n);
    d->chunk->offset = 0;
    d->chunk->stride = (int32_t)stride;
    d->chunk->size = (uint32_t)(want * stride);

    struct pw_time t;
    if (pw_stream_get_time_n(o->stream, &t, sizeof t) == 0 && t.rate.denom > 0) {
        // `delay` counts ticks of the graph's clock; the ring counts the stream's frames.
        int64_t frames = t.delay * (int64_t)o->rate * (int64_t)t.rate.num / (int64_t)t.rate.denom;
        atomic_store_explicit(&o->graph_delay, frames + (int64_t)t.buffered, memory_order_relaxed);
        if (n > 0 && o->rate > 0) {
            // The buffer queued now reaches the sink's output a cycle later: `delay`
            // (0 from the null sink) does not count that cycle, so it is added.
            int64_t after = (frames + (int64_t)t.buffered + 2 * (int64_t)want) * 1000000000LL / (int64_t)o->rate;
            atomic_store_explicit(&o->heard_by_ns, t.now + after, memory_order_relaxed);
        }
    }
    pw_stream_queue_buffer(o->stream, b);

    uint64_t waiting = atomic_load(&o->want);
    if (waiting) {
        uint64_t free = o->ring_frames - (atomic_load(&o->write) - (r + n));
        if (free >= waiting && atomic_exchange(&o->want, 0) != 0) {
            uint64_t one = 1;
            (void)!write(o->efd, &one, sizeof one);
        }
    }
}

static const struct pw_stream_events stream_events = {
    PW_VERSION_STREAM_EVENTS,
    .state_changed = on_state_changed,
    .process = on_process,
};

static const char *socket_dir(void) {
    const char *d = getenv("PIPEWIRE_RUNTIME_DIR");
    if (!d || !*d) d = getenv("XDG_RUNTIME_DIR");
    return d && *d ? d : NULL;
}

int playd_pw_available(void) {
    // No socket, no server: answers without loading libpipewire's modules.
    const char *remote = getenv("PIPEWIRE_REMOTE");
    if (!remote || !*remote) remote = "pipewire-0";
    char path[PATH_MAX];
    if (remote[0] == '/') snprintf(path, sizeof path, "%s", remote);
    else {
        const char *dir = socket_dir();
        if (!dir) return 0;
        snprintf(path, sizeof path, "%s/%s", dir, remote);
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISSOCK(st.st_mode)) return 0;
    char error[128];
    playd_pw *o = playd_pw_new(NULL, NULL, error, sizeof error);
    if (!o) return 0;
    playd_pw_free(o);
    return 1;
}

playd_pw *playd_pw_new(const char *target, const char *remote, char *error, size_t error_size) {
    pthread_once(&init_once, init_library);
    playd_pw *o = calloc(1, sizeof *o);
    if (!o) { set_error(error, error_size, "out of memory", ENOMEM); return NULL; }
    o->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (o->efd < 0) { set_error(error, error_size, "eventfd", errno); free(o); return NULL; }
    snprintf(o->target, sizeof o->target, "%s", target ? target : "");
    o->volume = 1.0f;
    o->synced_seq = -1;
    o->loop = pw_thread_loop_new("playd-pipewire", NULL);
    if (!o->loop) { set_error(error, error_size, "pw_thread_loop_new", errno); close(o->efd); free(o); return NULL; }
    // client-rt.conf: the data thread gets real-time priority where the system allows.
    o->context = pw_context_new(pw_thread_loop_get_loop(o->loop),
                                pw_properties_new(PW_KEY_CONFIG_NAME, "client-rt.conf", NULL), 0);
    if (!o->context) { set_error(error, error_size, "pw_context_new", errno); pw_thread_loop_destroy(o->loop); close(o->efd); free(o); return NULL; }
    if (pw_thread_loop_start(o->loop) < 0) {
        set_error(error, error_size, "pw_thread_loop_start", errno);
        pw_context_destroy(o->context); pw_thread_loop_destroy(o->loop); close(o->efd); free(o);
        return NULL;
    }
    pw_thread_loop_lock(o->loop);
    o->core = pw_context_connect(o->context, remote && *remote ? pw_properties_new(PW_KEY_REMOTE_NAME, remote, NULL) : NULL, 0);
    int err = errno;
    if (o->core) pw_core_add_listener(o->core, &o->core_listener, &core_events, o);
    pw_thread_loop_unlock(o->loop);
    if (!o->core) {
        set_error(error, error_size, "no PipeWire server answers (pw_context_connect)", err);
        playd_pw_free(o);
        return NULL;
    }
    return o;
}

static void destroy_stream(playd_pw *o) {
    if (!o->stream) return;
    spa_hook_remove(&o->stream_listener);
    // Disconnecting removes the node from the data loop before it returns: the process
    // callback does not run again, so the ring is free to go.
    pw_stream_destroy(o->stream);
    o->stream = NULL;
    o->connected = 0;
}

void playd_pw_free(playd_pw *o) {
    if (!o) return;
    pw_thread_loop_lock(o->loop);
    destroy_stream(o);
    if (o->core) { spa_hook_remove(&o->core_listener); pw_core_disconnect(o->core); o->core = NULL; }
    pw_thread_loop_unlock(o->loop);
    pw_thread_loop_stop(o->loop);
    pw_context_destroy(o->context);
    pw_thread_loop_destroy(o->loop);
    free(o->ring);
    close(o->efd);
    free(o);
}

static int apply_volume(playd_pw *o);

static void fill_positions(struct spa_audio_info_raw *info) {
    // FFmpeg's default layouts for 1–8 channels, in its channel order.
    static const uint32_t layouts[9][8] = {
        {0},
        {SPA_AUDIO_CHANNEL_MONO},
        {SPA_AUDIO_CHANNEL_FL, SPA_AUDIO_CHANNEL_FR},
        {SPA_AUDIO_CHANNEL_FL, SPA_AUDIO_CHANNEL_FR, SPA_AUDIO_CHANNEL_FC},
        {SPA_AUDIO_CHANNEL_FL, SPA_AUDIO_CHANNEL_FR, SPA_AUDIO_CHANNEL_RL, SPA_AUDIO_CHANNEL_RR},
        {SPA_AUDIO_CHANNEL_FL, SPA_AUDIO_CHANNEL_FR, SPA_AUDIO_CHANNEL_FC, SPA_AUDIO_CHANNEL_RL, SPA_AUDIO_CHANNEL_RR},
        {SPA_AUDIO_CHANNEL_FL, SPA_AUDIO_CHANNEL_FR, SPA_AUDIO_CHANNEL_FC, SPA_AUDIO_CHANNEL_LFE, SPA_AUDIO_CHANNEL_SL, SPA_AUDIO_CHANNEL_SR},
        {SPA_AUDIO_CHANNEL_FL, SPA_AUDIO_CHANNEL_FR, SPA_AUDIO_CHANNEL_FC, SPA_AUDIO_CHANNEL_LFE, SPA_AUDIO_CHANNEL_RC, SPA_AUDIO_CHANNEL_SL, SPA_AUDIO_CHANNEL_SR},
        {SPA_AUDIO_CHANNEL_FL, SPA_AUDIO_CHANNEL_FR, SPA_AUDIO_CHANNEL_FC, SPA_AUDIO_CHANNEL_LFE, SPA_AUDIO_CHANNEL_RL, SPA_AUDIO_CHANNEL_RR, SPA_AUDIO_CHANNEL_SL, SPA_AUDIO_CHANNEL_SR},
    };
    if (info->channels >= 1 && info->channels <= 8) memcpy(info->position, layouts[info->channels], info->channels * sizeof(uint32_t));
    else info->flags |= SPA_AUDIO_FLAG_UNPOSITIONED;
}

static void put_media(playd_pw *o, struct pw_properties *p) {
    if (o->title[0]) pw_properties_set(p, PW_KEY_MEDIA_TITLE, o->title);
    if (o->artist[0]) pw_properties_set(p, PW_KEY_MEDIA_ARTIST, o->artist);
    if (o->album[0]) pw_properties_set(p, "media.album", o->album);
    if (o->title[0] || o->artist[0]) {
        pw_properties_setf(p, PW_KEY_MEDIA_NAME, "%s%s%s", o->artist, o->artist[0] && o->title[0] ? " – " : "", o->title);
    }
}

// The stream's rate and cycle as properties: the graph runs at the track's rate when
// nothing else holds it at another (default.clock.allowed-rates), so neither playd nor
// PipeWire resamples. About 43 ms a cycle: 2048 frames up to 48 kHz, 4096 at 88.2/96
// kHz, and so on (pw-play's 100 ms ask gets the same 2048). A power of two: 940/44100
// made the graph run 512-frame cycles, and at 1024 frames the test machine's null sink
// lost one cycle in about 200 s of playback, for pw-play as for playd (2026-11-27).
static void put_rate(struct pw_properties *p, uint32_t rate) {
    uint32_t quantum = 2048;
    while (quantum < 16384 && (uint64_t)quantum * 48000 < (uint64_t)rate * 2048) quantum *= 2;
    pw_properties_setf(p, PW_KEY_NODE_RATE, "1/%u", rate);
    pw_properties_setf(p, PW_KEY_NODE_LATENCY, "%u/%u", quantum, rate);
}

static const struct spa_pod *format_param(struct spa_pod_builder *b, uint32_t rate, uint32_t channels, int format) {
    struct spa_audio_info_raw info = {
        .format = format == PLAYD_PW_S16 ? SPA_AUDIO_FORMAT_S16 : format == PLAYD_PW_S32 ? SPA_AUDIO_FORMAT_S32 : SPA_AUDIO_FORMAT_F32,
        .rate = rate, .channels = channels,
    };
    fill_positions(&info);
    return spa_format_audio_raw_build(b, SPA_PARAM_EnumFormat, &info);
}

// A ring for the format, counters at zero. Only while no callback can touch the ring
// (no stream, or the gate held). Under the loop's lock.
static int make_ring(playd_pw *o, uint32_t rate, uint32_t channels, int format, uint32_t ring_frames) {
    uint32_t sample = format == PLAYD_PW_S16 ? 2 : 4;
    uint8_t *ring = calloc((size_t)ring_frames * channels, sample);
    if (!ring) return -ENOMEM;
    free(o->ring);
    o->ring = ring;
    o->ring_frames = ring_frames;
    o->stride = sample * channels;
    o->rate = rate; o->channels = channels; o->format = format;
    atomic_store(&o->write, 0); atomic_store(&o->claim, 0); atomic_store(&o->read, 0);
    atomic_store(&o->want, 0); atomic_store(&o->graph_delay, 0); atomic_store(&o->heard_by_ns, 0);
    return 0;
}

// Another format on the stream there is, keeping its node (pw-dump shows one playd
// node for the daemon's life): deactivate it and wait for the server to have seen that
// (without the wait the graph kept its old rate in 2 runs of 5), swap the ring behind
// the gate, offer the new format and rate, activate. Under the loop's lock.
static int switch_format(playd_pw *o, uint32_t rate, uint32_t channels, int format, uint32_t ring_frames) {
    pw_stream_set_active(o->stream, false);
    roundtrip(o);
    atomic_store(&o->gate, 1);
    // The callback in progress, if any, finishes its copy (microseconds); a new one
    // sees the gate and leaves the ring alone.
    while (atomic_load(&o->inside)) {
        struct timespec ts = { 0, 100000 };
        nanosleep(&ts, NULL);
    }
    int r = make_ring(o, rate, channels, format, ring_frames);
    atomic_store(&o->gate, 0);
    if (r < 0) return r;
    uint8_t buffer[1024];
    struct spa_pod_builder b = SPA_POD_BUILDER_INIT(buffer, sizeof buffer);
    const struct spa_pod *params[1] = { format_param(&b, rate, channels, format) };
    r = pw_stream_update_params(o->stream, params, 1);
    if (r < 0) return r;
    struct pw_properties *p = pw_properties_new(NULL, NULL);
    if (!p) return -ENOMEM;
    put_rate(p, rate);
    pw_stream_update_properties(o->stream, &p->dict);
    pw_properties_free(p);
    pw_stream_set_active(o->stream, true);
    return atomic_load(&o->error);
}

int playd_pw_open(playd_pw *o, uint32_t rate, uint32_t channels, int format,
                  uint32_t ring_frames, char *error, size_t error_size) {
    if (rate < 8000 || rate > 768000 || channels < 1 || channels > 64 || ring_frames < 64) {
        set_error(error, error_size, "format out of range", EINVAL);
        return -EINVAL;
    }
    int err = atomic_load(&o->error);
    if (err) { set_error(error, error_size, "the PipeWire connection failed", err); return err; }
    pw_thread_loop_lock(o->loop);
    if (o->stream && o->rate == rate && o->channels == channels && o->format == format && o->ring_frames == ring_frames) {
        // The same format: the stream goes on as it was.
        pw_stream_set_active(o->stream, true);
        pw_thread_loop_unlock(o->loop);
        return 0;
    }
    if (o->stream) {
        int r = switch_format(o, rate, channels, format, ring_frames);
        pw_thread_loop_unlock(o->loop);
        if (r < 0) set_error(error, error_size, "switching the PipeWire stream's format", r);
        return r;
    }
    if (make_ring(o, rate, channels, format, ring_frames) < 0) {
        pw_thread_loop_unlock(o->loop);
        set_error(error, error_size, "ring", ENOMEM);
        return -ENOMEM;
    }
    struct pw_properties *props = pw_properties_new(
        PW_KEY_MEDIA_TYPE, "Audio", PW_KEY_MEDIA_CATEGORY, "Playback", PW_KEY_MEDIA_ROLE, "Music",
        PW_KEY_APP_NAME, "playd", PW_KEY_APP_ID, "playd", PW_KEY_NODE_NAME, "playd",
        PW_KEY_NODE_DESCRIPTION, "playd", NULL);
    put_rate(props, rate);
    if (o->target[0]) pw_properties_set(props, PW_KEY_TARGET_OBJECT, o->target);
    put_media(o, props);
    o->stream = pw_stream_new(o->core, "playd", props);
    if (!o->stream) {
        int e = errno;
        pw_thread_loop_unlock(o->loop);
        set_error(error, error_size, "pw_stream_new", e);
        return -(e ? e : EIO);
    }
    pw_stream_add_listener(o->stream, &o->stream_listener, &stream_events, o);
    uint8_t buffer[1024];
    struct spa_pod_builder b = SPA_POD_BUILDER_INIT(buffer, sizeof buffer);
    const struct spa_pod *params[1] = { format_param(&b, rate, channels, format) };
    int r = pw_stream_connect(o->stream, PW_DIRECTION_OUTPUT, PW_ID_ANY,
                              PW_STREAM_FLAG_AUTOCONNECT | PW_STREAM_FLAG_MAP_BUFFERS | PW_STREAM_FLAG_RT_PROCESS,
                              params, 1);
    if (r < 0) {
        destroy_stream(o);
        pw_thread_loop_unlock(o->loop);
        set_error(error, error_size, "pw_stream_connect", r);
        return r;
    }
    // Wait (at most 5 s) for the server to take the stream or refuse it.
    for (int timeouts = 0; timeouts < 5 && !o->connected && !atomic_load(&o->error)
                           && pw_stream_get_state(o->stream, NULL) != PW_STREAM_STATE_ERROR;) {
        if (pw_thread_loop_timed_wait(o->loop, 1) == ETIMEDOUT) timeouts++;
    }
    const char *why = NULL;
    enum pw_stream_state s = pw_stream_get_state(o->stream, &why);
    err = atomic_load(&o->error);
    if (s == PW_STREAM_STATE_ERROR || err || !o->connected) {
        destroy_stream(o);
        pw_thread_loop_unlock(o->loop);
        if (error && error_size) snprintf(error, error_size, "the PipeWire stream did not start: %s",
                                          why ? why : err ? strerror(-err) : "no answer in 5 s");
        return err ? err : -EIO;
    }
    if (o->volume != 1.0f) apply_volume(o);
    pw_thread_loop_unlock(o->loop);
    return 0;
}

void playd_pw_close(playd_pw *o) {
    playd_pw_rewind(o, LONG_MAX);
    pw_thread_loop_lock(o->loop);
    if (o->stream) pw_stream_set_active(o->stream, false);
    pw_thread_loop_unlock(o->loop);
}

int playd_pw_error(playd_pw *o) { return atomic_load(&o->error); }

long playd_pw_writable(playd_pw *o) {
    int err = atomic_load_explicit(&o->error, memory_order_relaxed);
    if (err) return err;
    if (!o->ring) return -EBADFD;
    uint64_t w = atomic_load_explicit(&o->write, memory_order_relaxed);
    return (long)(o->ring_frames - (w - atomic_load(&o->read)));
}

long playd_pw_write(playd_pw *o, const void *samples, long frames) {
    long free = playd_pw_writable(o);
    if (free < 0) return free;
    uint64_t n = min_u64((uint64_t)(frames < 0 ? 0 : frames), (uint64_t)free);
    uint64_t w = atomic_load_explicit(&o->write, memory_order_relaxed);
    uint64_t slot = w % o->ring_frames;
    uint64_t first = min_u64(n, o->ring_frames - slot);
    memcpy(o->ring + slot * o->stride, samples, first * o->stride);
    if (n > first) memcpy(o->ring, (const uint8_t *)samples + first * o->stride, (n - first) * o->stride);
    atomic_store(&o->write, w + n);
    return (long)n;
}

long playd_pw_delay(playd_pw *o) {
    if (!o->ring) return 0;
    uint64_t w = atomic_load_explicit(&o->write, memory_order_relaxed);
    uint64_t queued = w - atomic_load(&o->read);
    if (queued > 0) {
        int64_t graph = atomic_load_explicit(&o->graph_delay, memory_order_relaxed);
        return (long)queued + (long)(graph > 0 ? graph : 0);
    }
    // The ring is empty: what the graph still holds, by the clock (the end of a track
    // waits for it; at 2048-frame cycles the last 200 frames were cut without it).
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t left = atomic_load_explicit(&o->heard_by_ns, memory_order_relaxed) - ((int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec);
    return left > 0 ? (long)(left * (int64_t)o->rate / 1000000000LL) : 0;
}

long playd_pw_rewindable(playd_pw *o) {
    if (!o->ring) return 0;
    uint64_t w = atomic_load_explicit(&o->write, memory_order_relaxed);
    return (long)(w - atomic_load(&o->claim));
}

long playd_pw_rewind(playd_pw *o, long frames) {
    if (!o->ring || frames <= 0) return 0;
    uint64_t w = atomic_load_explicit(&o->write, memory_order_relaxed);
    uint64_t c = atomic_load(&o->claim);
    uint64_t target = w - min_u64((uint64_t)frames, w - c);
    if (target == w) return 0;
    atomic_store(&o->write, target);
    // A callback that loaded `write` before this store and claimed past `target` is
    // copying those frames now: they stay.
    uint64_t c2 = atomic_load(&o->claim);
    if (c2 > target) {
        target = min_u64(c2, w);
        atomic_store(&o->write, target);
    }
    return (long)(w - target);
}

int playd_pw_arm(playd_pw *o, long frames) {
    atomic_store(&o->want, (uint64_t)(frames > 0 ? frames : 1));
    long free = playd_pw_writable(o);
    if (free < 0 || free >= frames) { atomic_store(&o->want, 0); return -1; }
    return o->efd;
}

void playd_pw_disarm(playd_pw *o) {
    atomic_store(&o->want, 0);
    uint64_t v;
    (void)!read(o->efd, &v, sizeof v);
}

uint64_t playd_pw_underruns(playd_pw *o) { return atomic_load_explicit(&o->underruns, memory_order_relaxed); }

void playd_pw_set_media(playd_pw *o, const char *artist, const char *title, const char *album) {
    pw_thread_loop_lock(o->loop);
    snprintf(o->artist, sizeof o->artist, "%s", artist ? artist : "");
    snprintf(o->title, sizeof o->title, "%s", title ? title : "");
    snprintf(o->album, sizeof o->album, "%s", album ? album : "");
    if (o->stream) {
        struct pw_properties *p = pw_properties_new(NULL, NULL);
        if (p) {
            put_media(o, p);
            pw_stream_update_properties(o->stream, &p->dict);
            pw_properties_free(p);
        }
    }
    pw_thread_loop_unlock(o->loop);
}

// Under the loop's lock.
static int apply_volume(playd_pw *o) {
    if (!o->stream || o->channels == 0 || o->channels > 64) return 0;
    float v[64];
    for (uint32_t i = 0; i < o->channels; i++) v[i] = o->volume;
    return pw_stream_set_control(o->stream, SPA_PROP_channelVolumes, o->channels, v, 0);
}

int playd_pw_set_volume(playd_pw *o, float volume) {
    if (!(volume >= 0 && volume <= 1)) return -EINVAL;
    pw_thread_loop_lock(o->loop);
    o->volume = volume;
    int r = apply_volume(o);
    pw_thread_loop_unlock(o->loop);
    return r;
}

int playd_pw_node_id(playd_pw *o) {
    pw_thread_loop_lock(o->loop);
    int id = o->stream ? (int)pw_stream_get_node_id(o->stream) : -1;
    pw_thread_loop_unlock(o->loop);
    return id == (int)SPA_ID_INVALID ? -1 : id;
}
