import CLinux

/// Process-wide settings a daemon built on CoreStream applies once at start.
public enum ProcessTuning {
    /// glibc malloc settings for a long-running player. One arena: only the reader and
    /// control threads allocate (the render thread never does), and glibc's per-thread
    /// arenas cost resident memory for nothing. Call before starting threads.
    public static func tuneMalloc() {
        _ = clinux_limit_malloc_arenas(1)
        // Large blocks (the ring, a device buffer, a paced output's queue: reallocated
        // when the format changes) always come from mmap and go straight back to the
        // kernel when freed. By default glibc raises the threshold to the size of each
        // large block freed, after which such blocks come from the heap and leave holes
        // in it that the next track's allocations do not fill.
        _ = clinux_set_mmap_threshold(128 * 1024)
    }

    /// Gives freed heap pages back to the kernel (after opening a file: probing and
    /// measuring it allocate transiently). Not real-time safe.
    public static func releaseFreeMemory() {
        _ = clinux_malloc_trim()
    }
}
