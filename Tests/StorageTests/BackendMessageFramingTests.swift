import NIOCore
import NIOEmbedded
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

/// The slices the commit watch's handler passes postgres-nio (``ReadyForQueryHandler``): whole messages, each slice
/// ending at the first message boundary 2 KB or more in, the bytes unchanged and the signals as before.
@Suite struct ReadyForQuerySlicingTests {
    typealias Framing = BackendMessageFramingTests

    /// A claim's answer: a row description, `rows` data rows of `rowBytes` each, its tag, ready.
    static func claim(rows: Int, rowBytes: Int) -> [UInt8] {
        var bytes = Framing.message("T", Array(repeating: 7, count: 40))
        for row in 0..<rows { bytes += Framing.message("D", Array(repeating: UInt8(truncatingIfNeeded: row), count: rowBytes)) }
        return bytes + Framing.message("C", Array("SELECT \(rows)".utf8) + [0]) + Framing.message("Z", [UInt8(ascii: "I")])
    }

    /// Where each message of `stream` starts.
    static func starts(_ stream: [UInt8]) -> Set<Int> {
        var starts: Set<Int> = []
        var index = 0
        while index < stream.count {
            starts.insert(index)
            let length = stream[index + 1...index + 4].reduce(0) { $0 << 8 | Int($1) }
            index += 1 + length
        }
        return starts
    }

    @Test func theFramingStopsAtTheFirstBoundaryPastTheMinimum() {
        let stream = Self.claim(rows: 40, rowBytes: 150)
        var framing = BackendMessageFraming()
        var signals: [BackendMessageFraming.Signal] = []
        let end = framing.read(stream, boundaryAfter: 2048) { signals.append($0) }
        #expect(end >= 2048)
        #expect(Self.starts(stream).contains(end))
        #expect(!Self.starts(stream).contains(where: { $0 >= 2048 && $0 < end }), "the first boundary, not a later one")
        #expect(framing.atMessageStart)
        #expect(signals.isEmpty)
        #expect(framing.read(stream[end...], boundaryAfter: .max) { signals.append($0) } == stream.endIndex)
        #expect(signals == [.completed, .ready])
    }

    @Test func slicesOfWholeMessages() throws {
        let stream = Self.claim(rows: 2_000, rowBytes: 180) + Self.claim(rows: 3, rowBytes: 10)
        let starts = Self.starts(stream)
        // Reads cut anywhere, as TLS hands them on: one of 64 KB and more, and smaller ones.
        for readSize in [70_000, 16_384, 3_000, 1_000] {
            let watch = CommitWatch()
            let channel = EmbeddedChannel(handler: ReadyForQueryHandler(watch: watch))
            for offset in stride(from: 0, to: stream.count, by: readSize) {
                // As TLS hands them on: in a buffer larger than what was read.
                var read = ByteBufferAllocator().buffer(capacity: 2 * readSize)
                read.writeBytes(stream[offset..<min(offset + readSize, stream.count)])
                try channel.writeInbound(read)
            }
            var passed: [UInt8] = []
            var slices: [(start: Int, count: Int, readEnd: Bool)] = []
            while let slice = try channel.readInbound(as: ByteBuffer.self) {
                // Each a slice of its own bytes only (a read's last too): the decoder's copy of an unfinished message
                // copies to the end of what it was given.
                #expect(slice.capacity == slice.readableBytes, "reads of \(readSize) bytes: a slice spans more than its bytes")
                let start = passed.count
                passed += slice.readableBytesView
                slices.append((start, slice.readableBytes, passed.count % readSize == 0 || passed.count == stream.count))
            }
            #expect(passed == stream, "reads of \(readSize) bytes")
            for slice in slices where !slice.readEnd {
                // Every slice but a read's last ends at a message boundary, the first 2 KB or more into it.
                let end = slice.start + slice.count
                #expect(starts.contains(end), "reads of \(readSize) bytes: a slice ends inside a message")
                #expect(slice.count >= 2048)
                #expect(!starts.contains(where: { $0 >= slice.start + 2048 && $0 < end }), "the first boundary past 2 KB")
            }
            if readSize > 2 * 2048 { #expect(slices.count > stream.count / readSize + 1, "a large read is cut") }
            #expect(try channel.finish().isClean)
            _ = watch
        }
    }

    @Test func whatFollowsALossGoesOnWhole() throws {
        let watch = CommitWatch()
        let channel = EmbeddedChannel(handler: ReadyForQueryHandler(watch: watch))
        let stream = Self.claim(rows: 30, rowBytes: 150) + [0xFF] + Array(repeating: 0, count: 5_000)
        try channel.writeInbound(ByteBuffer(bytes: stream))
        var passed: [UInt8] = []
        while let slice = try channel.readInbound(as: ByteBuffer.self) { passed += slice.readableBytesView }
        #expect(passed == stream)
        try channel.writeInbound(ByteBuffer(bytes: Self.claim(rows: 30, rowBytes: 150)))
        let after = try #require(try channel.readInbound(as: ByteBuffer.self))
        #expect(after.readableBytes == Self.claim(rows: 30, rowBytes: 150).count, "after a loss: unread, whole")
        _ = try channel.finish()
    }
}
