/// PostgreSQL's backend messages framed from the bytes as they arrive, read only as far as a commit's confirmation
/// needs: each message is a type byte and a 32-bit big-endian length that counts itself and the body.
///
/// It reports a CommandComplete (`C`: a statement finished; its transaction may not have committed yet), an
/// ErrorResponse (`E`: after a CommandComplete, the commit itself failed, e.g. on a deferred constraint, and nothing
/// was kept) and a ReadyForQuery (`Z`: the server ended the request's implicit transaction). Bytes
/// that cannot be a backend message (a type PostgreSQL does not send, a length out of range, a ReadyForQuery not 5
/// bytes long or with a status other than idle, in a transaction or failed) lose the framing for good: whoever reads
/// the signals must then find out another way.
package struct BackendMessageFraming: Sendable {
    package enum Signal: Equatable, Sendable {
        /// A CommandComplete's header was read.
        case completed
        /// An ErrorResponse's header was read.
        case failed
        /// A whole ReadyForQuery was read.
        case ready
        /// The bytes stopped making sense as messages; nothing more is reported.
        case lost
    }

    /// The message types a backend sends (PostgreSQL's protocol, "Message Formats").
    private static let types = Set("RK23CdcGHWDIEVvnNAtS1sZT".utf8)
    /// Larger than any message PostgreSQL sends (its limit for a field is 1 GB).
    private static let longest: UInt32 = 1 << 30

    private enum Phase: Sendable {
        /// Reading a header: its type, then `read` of its four length bytes.
        case header(type: UInt8?, length: UInt32, read: Int)
        /// Skipping the body of a message.
        case body(type: UInt8, left: UInt32)
        case lost
    }
    private var phase = Phase.header(type: nil, length: 0, read: 0)

    package init() {}

    package var isLost: Bool {
        if case .lost = phase { return true }
        return false
    }

    /// Whether the next byte is a message's first.
    package var atMessageStart: Bool {
        if case .header(nil, _, _) = phase { return true }
        return false
    }

    /// Reads the next bytes of the stream, reporting each signal in order.
    package mutating func read(_ bytes: some Collection<UInt8>, signal: (Signal) -> Void) {
        _ = read(bytes, boundaryAfter: .max, signal: signal)
    }

    /// Reads the next bytes of the stream as far as the first message boundary at least `minimum` bytes in (or to
    /// their end, or to where the framing was lost), reporting each signal in order; where it stopped. `minimum` is
    /// at least 1: each call reads something.
    package mutating func read<Bytes: Collection<UInt8>>(
        _ bytes: Bytes,
        boundaryAfter minimum: Int,
        signal: (Signal) -> Void
    ) -> Bytes.Index {
        precondition(minimum > 0, "a read that stops before its first byte")
        var index = bytes.startIndex
        while index != bytes.endIndex {
            if atMessageStart, bytes.distance(from: bytes.startIndex, to: index) >= minimum { return index }
            switch phase {
            case .lost:
                return index
            case .header(nil, _, _):
                let type = bytes[index]
                index = bytes.index(after: index)
                guard Self.types.contains(type) else { return lose(signal, at: index) }
                phase = .header(type: type, length: 0, read: 0)
            case .header(.some(let type), let length, let read):
                let length = length << 8 | UInt32(bytes[index])
                index = bytes.index(after: index)
                guard read == 3 else {
                    phase = .header(type: type, length: length, read: read + 1)
                    continue
                }
                guard length >= 4, length <= Self.longest, type != UInt8(ascii: "Z") || length == 5 else {
                    return lose(signal, at: index)
                }
                if type == UInt8(ascii: "C") { signal(.completed) }
                if type == UInt8(ascii: "E") { signal(.failed) }
                phase = length == 4 ? .header(type: nil, length: 0, read: 0) : .body(type: type, left: length - 4)
            case .body(let type, let left):
                if type == UInt8(ascii: "Z") {
                    let status = bytes[index]
                    index = bytes.index(after: index)
                    guard status == UInt8(ascii: "I") || status == UInt8(ascii: "T") || status == UInt8(ascii: "E") else {
                        return lose(signal, at: index)
                    }
                    signal(.ready)
                    phase = .header(type: nil, length: 0, read: 0)
                    continue
                }
                let available = bytes.distance(from: index, to: bytes.endIndex)
                let skipped = min(Int(left), available)
                index = bytes.index(index, offsetBy: skipped)
                let rest = left - UInt32(skipped)
                phase = rest == 0 ? .header(type: nil, length: 0, read: 0) : .body(type: type, left: rest)
            }
        }
        return index
    }

    private mutating func lose<Index>(_ signal: (Signal) -> Void, at index: Index) -> Index {
        phase = .lost
        signal(.lost)
        return index
    }
}
