package import NIOCore
package import NIOHPACK

/// HPACK (RFC 7541) for a client's requests, without Huffman coding: what repeats on every request (the provider
/// token, topic, push type, authority) is added to the dynamic table once and sent as one index byte after that; what
/// is new on every request (`:path`, `apns-id`) is a literal kept out of the table, written as it is.
///
/// NIOHTTP2's encoder Huffman-codes every literal and hashes every name to search its tables: 13% of the push
/// daemon's CPU per notification in a profile. The values here are ASCII a client chose; a Huffman code saves a
/// fifth of a literal's bytes on the wire and costs a bit-by-bit pass over it.
package struct HTTP2HeaderEncoder {
    /// The table size this encoder assumes until the peer's SETTINGS_HEADER_TABLE_SIZE says otherwise, and the most
    /// it uses whatever the peer allows.
    package static let defaultTableSize = 4096

    private struct Entry {
        let name: String
        let value: String
        var size: Int { name.utf8.count + value.utf8.count + 32 }
    }

    /// Oldest first: the newest entry is index 62.
    private var entries: [Entry] = []
    private var size = 0
    private(set) var maxSize = Self.defaultTableSize
    /// The smallest size the table had since the last header block, when it changed: the next block starts with
    /// it (and then the size now, if that is larger), as RFC 7541 §4.2 asks.
    private var pendingSmallest: Int?

    package init() {}

    /// The peer's SETTINGS_HEADER_TABLE_SIZE: the table shrinks at once and the next block says so.
    package mutating func setPeerTableSize(_ peerSize: Int) {
        let newSize = min(max(peerSize, 0), Self.defaultTableSize)
        guard newSize != maxSize else { return }
        maxSize = newSize
        pendingSmallest = min(pendingSmallest ?? newSize, newSize)
        evict(toFit: 0)
    }

    /// Appends the header block of `headers` to `buffer`.
    package mutating func encode(_ headers: HPACKHeaders, to buffer: inout ByteBuffer) {
        if let smallest = pendingSmallest {
            Self.writeInteger(smallest, prefix: 5, flags: 0x20, to: &buffer)
            if maxSize != smallest { Self.writeInteger(maxSize, prefix: 5, flags: 0x20, to: &buffer) }
            pendingSmallest = nil
        }
        for (name, value, indexing) in headers {
            if let index = Self.staticPair(name, value) {
                Self.writeInteger(index, prefix: 7, flags: 0x80, to: &buffer)
            } else if indexing == .indexable {
                appendIndexable(name, value, to: &buffer)
            } else {
                // Literal without indexing (0000) or never indexed (0001).
                let flags: UInt8 = indexing == .neverIndexed ? 0x10 : 0x00
                Self.writeLiteral(name, value, prefix: 4, flags: flags, to: &buffer)
            }
        }
    }

    private mutating func appendIndexable(_ name: String, _ value: String, to buffer: inout ByteBuffer) {
        if let position = entries.lastIndex(where: { $0.value == value && $0.name == name }) {
            Self.writeInteger(Self.staticTableCount + entries.count - position, prefix: 7, flags: 0x80, to: &buffer)
            return
        }
        let entry = Entry(name: name, value: value)
        guard entry.size <= maxSize else {
            // Larger than the table (a peer's table of size 0 holds nothing): without indexing (0000), the table as it
            // is. With indexing it would empty both tables and add nothing (RFC 7541 §4.4).
            Self.writeLiteral(name, value, prefix: 4, flags: 0x00, to: &buffer)
            return
        }
        // Literal with incremental indexing (01).
        Self.writeLiteral(name, value, prefix: 6, flags: 0x40, to: &buffer)
        evict(toFit: entry.size)
        entries.append(entry)
        size += entry.size
    }

    private mutating func evict(toFit incoming: Int) {
        var dropped = 0
        while size + incoming > maxSize, dropped < entries.count {
            size -= entries[dropped].size
            dropped += 1
        }
        if dropped > 0 { entries.removeFirst(dropped) }
    }

    // MARK: Wire forms

    static let staticTableCount = 61

    /// Static table entries a request uses whole: `:method: POST` (3), `:scheme: https` (7).
    static func staticPair(_ name: String, _ value: String) -> Int? {
        switch (name, value) {
        case (":method", "POST"): 3
        case (":scheme", "https"): 7
        case (":method", "GET"): 2
        default: nil
        }
    }

    /// Static table names a request uses (RFC 7541 Appendix A).
    static func staticName(_ name: String) -> Int? {
        switch name {
        case ":authority": 1
        case ":path": 4
        case "authorization": 23
        case "content-length": 28
        case "content-type": 31
        default: nil
        }
    }

    private static func writeLiteral(_ name: String, _ value: String, prefix: Int, flags: UInt8, to buffer: inout ByteBuffer) {
        if let index = staticName(name) {
            writeInteger(index, prefix: prefix, flags: flags, to: &buffer)
        } else {
            buffer.writeInteger(flags)
            writeString(name, to: &buffer)
        }
        writeString(value, to: &buffer)
    }

    /// A string literal as it is (H = 0).
    private static func writeString(_ string: String, to buffer: inout ByteBuffer) {
        writeInteger(string.utf8.count, prefix: 7, flags: 0, to: &buffer)
        buffer.writeString(string)
    }

    /// RFC 7541 §5.1: `value` in an N-bit prefix after `flags`, continued 7 bits a byte.
    static func writeInteger(_ value: Int, prefix: Int, flags: UInt8, to buffer: inout ByteBuffer) {
        let limit = (1 << prefix) - 1
        if value < limit {
            buffer.writeInteger(flags | UInt8(value))
            return
        }
        buffer.writeInteger(flags | UInt8(limit))
        var rest = value - limit
        while rest >= 128 {
            buffer.writeInteger(UInt8(rest & 0x7f | 0x80))
            rest >>= 7
        }
        buffer.writeInteger(UInt8(rest))
    }
}
