import CLinux

/// Process-wide settings a daemon built on CoreStream applies once at start.
public enum ProcessTuning {
    /// One malloc arena: only the reader and control threads allocate (the render
    /// thread never does), and glibc's per-thread arenas cost resident memory for
    /// nothing. Call before starting threads.
    public static func limitMallocArenas() {
        _ = clinux_limit_malloc_arenas(1)
    }

    /// Gives freed heap pages back to the kernel (after opening a file: probing and
    /// measuring it allocate transiently). Not real-time safe.
    public static func releaseFreeMemory() {
        _ = clinux_malloc_trim()
    }
}
