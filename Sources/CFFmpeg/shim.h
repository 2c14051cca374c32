// Shim for FFmpeg macros that do not import into Swift.
//
// Why it exists: AVERROR(), AVERROR_EOF, AV_NOPTS_VALUE and friends are function-like
// or expression macros that the Clang importer drops. Every symbol added here is
// prefixed `cffmpeg_`. It can shrink if FFmpeg ever exports these as constants.
#ifndef CFFMPEG_SHIM_H
#define CFFMPEG_SHIM_H

#include <errno.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>
#include <libavformat/avformat.h>
#include <libavcodec/avcodec.h>
#include <libavutil/avutil.h>
#include <libavutil/avstring.h>
#include <libavutil/channel_layout.h>
#include <libavutil/dict.h>
#include <libavutil/error.h>
#include <libavutil/opt.h>
#include <libavutil/mathematics.h>
#include <libavutil/samplefmt.h>
#include <libswresample/swresample.h>

static inline int cffmpeg_averror(int posixErrno) { return AVERROR(posixErrno); }
static inline int cffmpeg_averror_eof(void) { return AVERROR_EOF; }
static inline int cffmpeg_averror_invaliddata(void) { return AVERROR_INVALIDDATA; }
static inline int cffmpeg_averror_decoder_not_found(void) { return AVERROR_DECODER_NOT_FOUND; }
static inline int cffmpeg_averror_demuxer_not_found(void) { return AVERROR_DEMUXER_NOT_FOUND; }
static inline int cffmpeg_averror_patchwelcome(void) { return AVERROR_PATCHWELCOME; }
static inline int64_t cffmpeg_nopts_value(void) { return AV_NOPTS_VALUE; }

/// av_err2str() is a macro around a compound literal; this writes into the caller's buffer.
static inline void cffmpeg_strerror(int err, char *buf, size_t size) {
    av_strerror(err, buf, size);
}

/// Quiet FFmpeg's own stderr logging: playd reports errors itself, naming the file.
static inline void cffmpeg_set_log_quiet(void) { av_log_set_level(AV_LOG_QUIET); }

/// Local media is read through this AVIOContext over a file descriptor that playd
/// opened and checked itself (a regular file, O_NONBLOCK open, inside the roots),
/// never by handing FFmpeg a path: FFmpeg's own open would follow the name again
/// (a FIFO swapped in blocks it forever) and would pick any protocol from it
/// (`subfile:`, `concat:`). The descriptor travels in `opaque`.
static inline int cffmpeg_fd_read(void *opaque, uint8_t *buf, int size) {
    int fd = (int)(intptr_t)opaque;
    for (;;) {
        ssize_t n = read(fd, buf, (size_t)size);
        if (n > 0) return (int)n;
        if (n == 0) return AVERROR_EOF;
        if (errno == EINTR) continue;
        return AVERROR(errno);
    }
}

static inline int64_t cffmpeg_fd_seek(void *opaque, int64_t offset, int whence) {
    int fd = (int)(intptr_t)opaque;
    if (whence & AVSEEK_SIZE) {
        struct stat st;
        if (fstat(fd, &st) != 0) return AVERROR(errno);
        return (int64_t)st.st_size;
    }
    off_t r = lseek(fd, (off_t)offset, whence & ~AVSEEK_FORCE);
    return r < 0 ? AVERROR(errno) : (int64_t)r;
}

/// Frees a context opened by cffmpeg_open_fd_input, its AVIOContext and buffer, and
/// closes the descriptor. avformat_close_input() leaves a custom AVIOContext alone.
static inline void cffmpeg_close_fd_input(AVFormatContext **ctx) {
    if (!ctx || !*ctx) return;
    if (!((*ctx)->flags & AVFMT_FLAG_CUSTOM_IO)) { avformat_close_input(ctx); return; }
    AVIOContext *pb = (*ctx)->pb;
    avformat_close_input(ctx);
    if (pb) {
        int fd = (int)(intptr_t)pb->opaque;
        av_freep(&pb->buffer);
        avio_context_free(&pb);
        close(fd);
    }
}

/// Opens `fd` (owned from here on: closed on failure, or by cffmpeg_close_fd_input) as
/// media with a demuxer from the comma list `allowed`, and no protocol at all for
/// anything a demuxer would open on its own (HLS segments, concat entries: the
/// protocol whitelist "none" names no protocol). The demuxer is probed first; one not
/// in `allowed` is not opened: returns 1 with its name in `detected` (a static
/// string). Otherwise 0 and the open context in `out`, or a negative AVERROR
/// (AVERROR_EOF: the file ends before its header does).
static inline int cffmpeg_open_fd_input(int fd, const char *url, const char *allowed,
                                        AVFormatContext **out, const char **detected) {
    *out = NULL;
    *detected = NULL;
    AVFormatContext *ctx = avformat_alloc_context();
    unsigned char *buf = av_malloc(32768);
    AVIOContext *pb = buf ? avio_alloc_context(buf, 32768, 0, (void *)(intptr_t)fd,
                                               cffmpeg_fd_read, NULL, cffmpeg_fd_seek) : NULL;
    if (!ctx || !buf || !pb) {
        if (pb) { av_freep(&pb->buffer); avio_context_free(&pb); } else { av_free(buf); }
        avformat_free_context(ctx);
        close(fd);
        return AVERROR(ENOMEM);
    }
    const AVInputFormat *fmt = NULL;
    int ret = av_probe_input_buffer2(pb, &fmt, url, NULL, 0, 0);
    if (ret < 0 || !fmt || av_match_list(fmt->name, allowed, ',') <= 0) {
        if (ret >= 0 && fmt) { *detected = fmt->name; ret = 1; }
        av_freep(&pb->buffer); avio_context_free(&pb);
        avformat_free_context(ctx);
        close(fd);
        return ret < 0 ? ret : 1;
    }
    ctx->pb = pb;
    ctx->format_whitelist = av_strdup(allowed);
    AVDictionary *opts = NULL;
    av_dict_set(&opts, "protocol_whitelist", "none", 0);
    /* A 16-bit PCM WAV (w64 too) asks avformat_find_stream_info to probe its first
       32 packets for another codec (MP3 or AC-3 mislabelled as PCM): every demuxer's
       probe over buffers growing to 128 KB, 12-15 ms of a 15 ms open, and playd opens
       a file twice per play (the second open restarts the decode from frame 0). One
       packet (4 KB, ten MP3 frames) still finds such a codec. */
    av_dict_set(&opts, "max_probe_packets", "1", 0);
    ret = avformat_open_input(&ctx, url, fmt, &opts);
    av_dict_free(&opts);
    if (ret < 0) {
        /* Demuxers report a header cut short by the end of the file as EIO (flacdec,
           wavdec): when the reader did reach the end and no read failed, say EOF, so
           the file is "truncated" rather than an I/O error. */
        if (ret == AVERROR(EIO) && pb->eof_reached && (pb->error == 0 || pb->error == AVERROR_EOF)) ret = AVERROR_EOF;
        /* avformat_open_input freed ctx, not the custom pb. */
        av_freep(&pb->buffer); avio_context_free(&pb);
        close(fd);
        return ret;
    }
    *out = ctx;
    return 0;
}

/// HTTP failures FFmpeg's http protocol reports (FFERRTAG values, which do not import).
static inline int cffmpeg_averror_http_bad_request(void) { return AVERROR_HTTP_BAD_REQUEST; }
static inline int cffmpeg_averror_http_unauthorized(void) { return AVERROR_HTTP_UNAUTHORIZED; }
static inline int cffmpeg_averror_http_forbidden(void) { return AVERROR_HTTP_FORBIDDEN; }
static inline int cffmpeg_averror_http_not_found(void) { return AVERROR_HTTP_NOT_FOUND; }
static inline int cffmpeg_averror_http_other_4xx(void) { return AVERROR_HTTP_OTHER_4XX; }
static inline int cffmpeg_averror_http_server_error(void) { return AVERROR_HTTP_SERVER_ERROR; }
static inline int cffmpeg_averror_exit(void) { return AVERROR_EXIT; }

/// Opens media read through `pb` (a network stream's AVIOContext, owned by the
/// caller: neither freed here nor by avformat_close_input) with a demuxer from the
/// comma list `allowed`, and no protocol for anything a demuxer would open on its own.
/// `interrupt` lets another thread or a deadline abort a blocked read; `options` are
/// the demuxer's (probesize, analyzeduration). Returns 0 with the context in `out`, 1
/// with the detected demuxer's name in `detected` when it is not allowed, or a
/// negative AVERROR.
static inline int cffmpeg_open_pb_input(AVIOContext *pb, const char *url, const char *allowed,
                                        AVIOInterruptCB interrupt, unsigned probesize, AVDictionary **options,
                                        AVFormatContext **out, const char **detected) {
    *out = NULL;
    *detected = NULL;
    const AVInputFormat *fmt = NULL;
    int ret = av_probe_input_buffer2(pb, &fmt, url, NULL, 0, probesize);
    if (ret < 0) return ret;
    if (!fmt || av_match_list(fmt->name, allowed, ',') <= 0) {
        *detected = fmt ? fmt->name : "?";
        return 1;
    }
    AVFormatContext *ctx = avformat_alloc_context();
    if (!ctx) return AVERROR(ENOMEM);
    ctx->pb = pb;
    ctx->interrupt_callback = interrupt;
    ctx->format_whitelist = av_strdup(allowed);
    av_dict_set(options, "protocol_whitelist", "none", 0);
    ret = avformat_open_input(&ctx, url, fmt, options);
    if (ret < 0) return ret;  /* ctx freed by avformat_open_input, pb left alone */
    *out = ctx;
    return 0;
}

#endif
