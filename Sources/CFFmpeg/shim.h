// Shim for FFmpeg macros that do not import into Swift.
//
// Why it exists: AVERROR(), AVERROR_EOF, AV_NOPTS_VALUE and friends are function-like
// or expression macros that the Clang importer drops. Every symbol added here is
// prefixed `cffmpeg_`. It can shrink if FFmpeg ever exports these as constants.
#ifndef CFFMPEG_SHIM_H
#define CFFMPEG_SHIM_H

#include <errno.h>
#include <libavformat/avformat.h>
#include <libavcodec/avcodec.h>
#include <libavutil/avutil.h>
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

#endif
