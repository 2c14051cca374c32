import CFFmpeg
#if canImport(Glibc)
import Glibc
#endif

/// Opens local media for FFmpeg: through ``LocalFile`` (a regular file inside the
/// roots, never a blocking open), read by FFmpeg from that descriptor, with a demuxer
/// from ``demuxers`` only and no protocol for anything a demuxer would open itself.
///
/// Why: libavformat picks the demuxer by content, not by name, and several open
/// other files on their own. An HLS playlist inside the roots (also when named
/// `x.mp3`) made playd play a file outside them; `concat`, `dash`, `image2`, `tee`
/// and protocols like `subfile:` can do the same (CVE-2016-1898, CVE-2017-9993;
/// Debian 12's FFmpeg 5.1 has no fix for the newer HLS bypasses). See the C side,
/// `cffmpeg_open_fd_input`.
///
/// Thread: any. Real-time safe: no.
enum MediaInput {
    /// Audio containers playd opens (FFmpeg demuxer names; a multi-name demuxer such as
    /// `mov,mp4,m4a,3gp,3g2,mj2` is matched by any one of its names).
    static let demuxers = ["wav", "w64", "flac", "ogg", "mp3", "mov", "matroska", "aiff", "ape", "wv", "aac",
                           "caf", "asf", "mpc", "mpc8", "tta", "dsf", "au", "ac3", "eac3", "dts", "truehd", "mlp",
                           "amr", "tak", "shn", "voc", "wsaud", "oma", "sox", "xwma"]
    static let allowList = demuxers.joined(separator: ",")

    /// Demuxers that mean "this is not audio at all" rather than "a container playd
    /// does not open": pictures and text.
    private static func isNotAudio(_ name: String) -> Bool {
        name.hasSuffix("_pipe") || name.hasPrefix("image") || ["tty", "srt", "webvtt", "ass", "subviewer", "jacosub",
                                                              "microdvd", "mpl2", "sami", "vplayer", "lrc"].contains(name)
    }

    /// The open input; close it with ``close(_:)``.
    static func open(_ path: String) throws(StreamError) -> UnsafeMutablePointer<AVFormatContext> {
        _ = FFmpegCall.quietLogging
        let (fd, _) = try LocalFile.openRegular(path)
        var ctx: UnsafeMutablePointer<AVFormatContext>?
        var detected: UnsafePointer<CChar>?
        // The descriptor is cffmpeg_open_fd_input's from here on.
        let ret = cffmpeg_open_fd_input(fd, path, allowList, &ctx, &detected)
        if ret == 1 {
            let name = detected.map { String(cString: $0) } ?? "?"
            if isNotAudio(name) {
                throw StreamError(.notAudio, "\(path): not an audio file (FFmpeg reads it as \(name))")
            }
            throw StreamError(.unsupportedFormat,
                              "\(path): a \(name) file, which playd does not open (it opens the audio containers \(demuxers.joined(separator: ", ")))")
        }
        guard ret >= 0, let fmt = ctx else {
            if ret == cffmpeg_averror_eof() {
                throw StreamError(.truncated, "\(path): the file ends inside its header (truncated)")
            }
            if [EIO, ENOMEM, EMFILE, ENFILE].map({ cffmpeg_averror($0) }).contains(ret) {
                throw FFmpegCall.error(.ioError, file: path, call: "avformat_open_input", ret)
            }
            throw StreamError(.notAudio, "\(path): not an audio file FFmpeg can read (avformat_open_input() failed: \(FFmpegCall.describe(ret)))")
        }
        return fmt
    }

    /// Whether `ctx`'s network response ended cleanly (``NetworkBuffer/endedCleanly``);
    /// false for a local file or a connection that broke.
    static func endedCleanly(_ ctx: UnsafeMutablePointer<AVFormatContext>) -> Bool {
        guard let o = ctx.pointee.opaque else { return false }
        return Unmanaged<NetworkBuffer>.fromOpaque(o).takeUnretainedValue().endedCleanly
    }

    /// Closes a context from ``open(_:)`` or ``NetworkInput``'s (whose network buffer,
    /// kept in `opaque`, goes with it).
    static func close(_ ctx: inout UnsafeMutablePointer<AVFormatContext>?) {
        if let c = ctx, let o = c.pointee.opaque {
            c.pointee.opaque = nil
            let buffer = Unmanaged<NetworkBuffer>.fromOpaque(o).takeRetainedValue()
            avformat_close_input(&ctx)  // a custom AVIOContext is left to its owner
            buffer.close()
            return
        }
        cffmpeg_close_fd_input(&ctx)
    }
}
