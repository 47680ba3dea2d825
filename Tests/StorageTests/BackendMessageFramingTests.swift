import Testing

@testable import Storage

/// The framing that tells a connection's commits (``BackendMessageFraming``), on bytes as PostgreSQL sends them.
@Suite struct BackendMessageFramingTests {
    /// A backend message: its type, its length (counting itself) and its body.
    static func message(_ type: Character, _ body: [UInt8] = []) -> [UInt8] {
        let length = UInt32(body.count + 4)
        return [type.asciiValue!] + [24, 16, 8, 0].map { UInt8(truncatingIfNeeded: length >> $0) } + body
    }

    /// What a statement's answer looks like: parse and bind complete, a row description, rows, the command's tag,
    /// then ready for query (idle).
    static let statement: [UInt8] =
        message("1") + message("2") + message("T", Array(repeating: 7, count: 40)) + message("D", Array(repeating: 1, count: 300))
        + message("D", Array(repeating: 2, count: 3)) + message("C", Array("INSERT 0 2".utf8) + [0]) + message("Z", [UInt8(ascii: "I")])

    static func signals(_ chunks: [[UInt8]]) -> [BackendMessageFraming.Signal] {
        var framing = BackendMessageFraming()
        var signals: [BackendMessageFraming.Signal] = []
        for chunk in chunks { framing.read(chunk) { signals.append($0) } }
        return signals
    }

    @Test func aStatementIsCompletedThenReady() {
        #expect(Self.signals([Self.statement]) == [.completed, .ready])
        #expect(Self.signals([Self.statement + Self.statement]) == [.completed, .ready, .completed, .ready])
    }

    /// However the stream is cut into reads (TCP and TLS records cut it anywhere), the signals are the same.
    @Test func theSameWhereverTheReadsAreCut() {
        let stream = Self.message("S", Array("a\0b\0".utf8)) + Self.statement + Self.message("N", [1, 2, 3]) + Self.statement
        for size in [1, 2, 3, 5, 7, 64, 333] {
            let chunks = stride(from: 0, to: stream.count, by: size).map { Array(stream[$0..<min($0 + size, stream.count)]) }
            #expect(Self.signals(chunks) == [.completed, .ready, .completed, .ready], "reads of \(size) bytes")
        }
        for cut in 1..<stream.count {
            let signals = Self.signals([Array(stream[..<cut]), Array(stream[cut...])])
            #expect(signals == [.completed, .ready, .completed, .ready], "cut at \(cut)")
        }
    }

    /// An ErrorResponse is reported wherever it comes; after a CommandComplete it is the commit that failed.
    @Test func anErrorIsReported() {
        let refused =
            Self.message("C", Array("INSERT 0 1".utf8) + [0]) + Self.message("E", Array("SERROR\0C23503\0\0".utf8))
            + Self.message("Z", [UInt8(ascii: "I")])
        #expect(Self.signals([refused]) == [.completed, .failed, .ready])
        #expect(Self.signals(refused.map { [$0] }) == [.completed, .failed, .ready])
    }

    /// The watch's outcome from the signals alone: an error between a CommandComplete and the ReadyForQuery is a
    /// refused commit; one before the CommandComplete is the statement's own (it throws) and leaves the next commit alone.
    @Test func theWatchTellsARefusedCommit() async {
        let watch = CommitWatch()
        watch.completed()
        watch.ready()
        #expect(await watch.confirmation() == .committed)
        watch.completed()
        watch.failed()
        watch.ready()
        #expect(await watch.confirmation() == .rolledBack)
        watch.failed()
        watch.ready()
        watch.completed()
        watch.ready()
        #expect(await watch.confirmation() == .committed)
        watch.completed()
        watch.failed()
        watch.close()
        #expect(await watch.confirmation() == .closed, "no ReadyForQuery: a FATAL error may follow a commit")
    }

    @Test func readyOnlyWhenWhole() {
        let ready = Self.message("Z", [UInt8(ascii: "T")])
        #expect(Self.signals([Array(ready.dropLast())]) == [])
        #expect(Self.signals([Array(ready.dropLast()), [UInt8(ascii: "T")]]) == [.ready])
    }

    /// Bytes that are not backend messages lose the framing for good: nothing after them is believed.
    @Test(arguments: [
        ("a type PostgreSQL does not send", [UInt8(ascii: "x"), 0, 0, 0, 4]),
        ("a length below its own size", [UInt8(ascii: "D"), 0, 0, 0, 3]),
        ("a length over 1 GB", [UInt8(ascii: "D"), 0x40, 0, 0, 1]),
        ("a ReadyForQuery of 6 bytes", [UInt8(ascii: "Z"), 0, 0, 0, 6, UInt8(ascii: "I"), 0]),
        ("a ReadyForQuery with status X", [UInt8(ascii: "Z"), 0, 0, 0, 5, UInt8(ascii: "X")]),
        ("TLS bytes (a record header)", [0x17, 0x03, 0x03, 0x00, 0x40]),
    ])
    func anythingElseIsLost(what: String, bytes: [UInt8]) {
        var framing = BackendMessageFraming()
        var signals: [BackendMessageFraming.Signal] = []
        framing.read(bytes + Self.statement) { signals.append($0) }
        #expect(signals == [.lost], "\(what)")
        #expect(framing.isLost)
    }
}
