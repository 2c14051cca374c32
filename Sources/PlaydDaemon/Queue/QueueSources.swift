import CoreStream
#if canImport(Glibc)
import Glibc
#endif

/// Turns what a user gives `add` into file paths: files as they are, directories
/// walked recursively in natural order ("2 Song" before "10 Song"), and M3U/M3U8/PLS
/// playlists read line by line (relative entries against the playlist's directory).
enum QueueSources {
    typealias Error = StreamError

    /// File name extensions taken from directories (playlists and explicit files may
    /// name anything: an unplayable entry is reported and skipped when its turn comes).
    static let audioExtensions: Set<String> = ["flac", "mp3", "m4a", "m4b", "mp4", "aac", "ogg", "oga", "opus",
                                                "wav", "wv", "ape", "aif", "aiff", "alac", "wma", "mka", "mpc", "caf"]

    static func expand(_ path: String) throws(Error) -> [String] {
        var st = stat()
        guard stat(path, &st) == 0 else {
            let e = errno
            throw StreamError(e == ENOENT ? .fileNotFound : (e == EACCES ? .permissionDenied : .ioError),
                              "\(path): \(String(cString: strerror(e)))")
        }
        if (st.st_mode & S_IFMT) == S_IFDIR {
            var seen: Set<[UInt64]> = []
            return walk(path, &seen)
        }
        switch fileExtension(path) {
        case "m3u", "m3u8": return try playlist(path) { line in line.hasPrefix("#") ? nil : line }
        case "pls":
            return try playlist(path) { line in
                // FileN=path
                guard line.lowercased().hasPrefix("file"), let eq = line.firstIndex(of: "=") else { return nil }
                return String(line[line.index(after: eq)...])
            }
        default: return [path]
        }
    }

    private static func fileExtension(_ path: String) -> String {
        let name = path.split(separator: "/").last.map(String.init) ?? path
        guard let dot = name.lastIndex(of: "."), dot != name.startIndex else { return "" }
        return name[name.index(after: dot)...].lowercased()
    }

    /// Audio files under `dir`, natural order, each directory once (symlink loops).
    private static func walk(_ dir: String, _ seen: inout Set<[UInt64]>) -> [String] {
        var st = stat()
        guard stat(dir, &st) == 0, seen.insert([UInt64(st.st_dev), UInt64(st.st_ino)]).inserted,
              let names = names(in: dir) else { return [] }
        var out: [String] = []
        for name in names.sorted(by: naturalLess) {
            let p = dir.hasSuffix("/") ? dir + name : dir + "/" + name
            var s = stat()
            guard stat(p, &s) == 0 else { continue }
            if (s.st_mode & S_IFMT) == S_IFDIR {
                out += walk(p, &seen)
            } else if audioExtensions.contains(fileExtension(p)) {
                out.append(p)
            }
        }
        return out
    }

    /// The names in `dir` but hidden ones, unsorted; nil when it cannot be read.
    static func names(in dir: String) -> [String]? {
        guard let d = opendir(dir) else { return nil }
        defer { closedir(d) }
        var names: [String] = []
        while let e = readdir(d) {
            let name = withUnsafeBytes(of: e.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if !name.hasPrefix(".") { names.append(name) }
        }
        return names
    }

    private static func playlist(_ path: String, _ entry: (String) -> String?) throws(Error) -> [String] {
        guard let f = fopen(path, "r") else {
            throw StreamError(errno == EACCES ? .permissionDenied : .ioError, "\(path): \(String(cString: strerror(errno)))")
        }
        defer { fclose(f) }
        let base = path.contains("/") ? String(path[..<path.lastIndex(of: "/")!]) : "."
        var out: [String] = []
        var line: UnsafeMutablePointer<CChar>?
        var cap = 0
        defer { free(line) }
        while getline(&line, &cap, f) >= 0 {
            var text = String(cString: line!)
            if text.hasPrefix("\u{FEFF}") { text.removeFirst() }
            while let last = text.last, last.isNewline || last == " " { text.removeLast() }
            guard !text.isEmpty, let e = entry(text), !e.isEmpty else { continue }
            if e.hasPrefix("file://") { out.append(String(e.dropFirst(7))); continue }
            if e.contains("://") { continue }  // streams are not supported
            out.append(e.hasPrefix("/") ? e : base + "/" + e)
        }
        return out
    }

    /// Natural order: digit runs compare as numbers, the rest case-insensitively.
    static func naturalLess(_ a: String, _ b: String) -> Bool {
        var i = a.unicodeScalars.makeIterator(), j = b.unicodeScalars.makeIterator()
        var x = i.next(), y = j.next()
        func isDigit(_ c: Unicode.Scalar?) -> Bool { c.map { $0.value >= 48 && $0.value <= 57 } ?? false }
        while let cx = x, let cy = y {
            if isDigit(cx) && isDigit(cy) {
                var nx = "", ny = ""
                while isDigit(x) { nx.unicodeScalars.append(x!); x = i.next() }
                while isDigit(y) { ny.unicodeScalars.append(y!); y = j.next() }
                let tx = nx.drop { $0 == "0" }, ty = ny.drop { $0 == "0" }
                if tx.count != ty.count { return tx.count < ty.count }
                if tx != ty { return tx < ty }
                continue
            }
            let lx = Character(cx).lowercased(), ly = Character(cy).lowercased()
            if lx != ly { return lx < ly }
            x = i.next()
            y = j.next()
        }
        if x == nil && y == nil { return a < b }
        return x == nil
    }
}
