import NIOConcurrencyHelpers
package import NIOCore
import NIOSSL
package import PostgresNIO

/// Tells when a statement on a connection has committed, from the server's own ReadyForQuery, without a round trip.
///
/// postgres-nio answers a statement at its CommandComplete, which PostgreSQL sends before the implicit commit at the
/// end of the request; the ReadyForQuery that follows says the commit happened. postgres-nio does not tell when that
/// comes, so a handler in front of it in the connection's pipeline reads the message framing
/// (``BackendMessageFraming``) and this watch keeps what it saw: whether a CommandComplete has been read with no
/// ReadyForQuery after it, and whether an ErrorResponse came between them (the commit was refused: postgres-nio, which
/// had already returned the statement, does not tell its caller). Installed on a connection before its first statement
/// (``install(on:)``), it lets ``PostgresConnection/confirmCommitted(logger:prepared:)`` answer at once when the
/// ReadyForQuery came in the same read as the statement's end (nearly always), or wait for it; a round trip of its own
/// is left for a connection whose framing was lost.
package final class CommitWatch: Sendable {
    /// What a statement just finished on the connection can be told about its commit.
    package enum Confirmation: Equatable, Sendable {
        /// A ReadyForQuery came after its CommandComplete: committed.
        case committed
        /// An ErrorResponse came between its CommandComplete and the ReadyForQuery: the commit failed (a deferred
        /// constraint, a serialization failure at commit), nothing was kept.
        case rolledBack
        /// The connection closed first: the outcome is unknown.
        case closed
        /// The framing was lost: ask the server.
        case unsure
    }

    private struct State {
        var awaitingReady = false
        /// An ErrorResponse came after the last CommandComplete.
        var failedSinceCompletion = false
        /// What the last ReadyForQuery ended.
        var outcome = Confirmation.committed
        var lost = false
        var closed = false
        var waiting: [CheckedContinuation<Confirmation, Never>] = []
    }
    private let state = NIOLockedValueBox(State())

    func completed() {
        state.withLockedValue { state in
            state.awaitingReady = true
            state.failedSinceCompletion = false
        }
    }

    /// An error before a statement's CommandComplete is the statement's own (postgres-nio throws it); only one after
    /// it concerns the commit.
    func failed() {
        state.withLockedValue { state in
            if state.awaitingReady { state.failedSinceCompletion = true }
        }
    }

    func ready() {
        let (waiting, outcome) = state.withLockedValue { state in
            if state.awaitingReady {
                state.outcome = state.failedSinceCompletion ? .rolledBack : .committed
            }
            state.awaitingReady = false
            state.failedSinceCompletion = false
            defer { state.waiting = [] }
            return (state.waiting, state.outcome)
        }
        for continuation in waiting { continuation.resume(returning: outcome) }
    }

    func lose() { end { $0.lost = true } }

    func close() { end { $0.closed = true } }

    private func end(_ change: (inout State) -> Void) {
        let (waiting, answer) = state.withLockedValue { state in
            change(&state)
            defer { state.waiting = [] }
            return (state.waiting, state.lost ? Confirmation.unsure : .closed)
        }
        for continuation in waiting { continuation.resume(returning: answer) }
    }

    /// The commit of the statement that just finished on the connection (its CommandComplete already read), waiting for
    /// the ReadyForQuery if it has not come yet.
    package func confirmation() async -> Confirmation {
        await withCheckedContinuation { continuation in
            let answer: Confirmation? = state.withLockedValue { state in
                if state.lost { return .unsure }
                if !state.awaitingReady { return state.outcome }
                if state.closed { return .closed }
                state.waiting.append(continuation)
                return nil
            }
            if let answer { continuation.resume(returning: answer) }
        }
    }
}

extension CommitWatch {
    /// A connection's watch, for as long as the connection exists (a closed connection's watch still tells what it
    /// read before the end).
    private struct Entry {
        weak var connection: PostgresConnection?
        let watch: CommitWatch
    }

    /// The watches of the process's connections, by connection.
    private static let installed = NIOLockedValueBox<[ObjectIdentifier: Entry]>([:])

    /// The connection's watch, if it has one.
    package static func of(_ connection: PostgresConnection) -> CommitWatch? {
        installed.withLockedValue { entries in
            guard let entry = entries[ObjectIdentifier(connection)], entry.connection === connection else { return nil }
            return entry.watch
        }
    }

    /// The connection's channel. postgres-nio keeps it internal; its stored property is read by reflection, once per
    /// connection. Nil if a postgres-nio release renames it: the connection then keeps the round trip
    /// (`CommitConfirmationTests` fails, so an upgrade that does this is noticed).
    package static func channel(of connection: PostgresConnection) -> (any Channel)? {
        Mirror(reflecting: connection).descendant("channel") as? any Channel
    }

    /// Puts a watch on the connection unless it has one. Call it while the connection is idle (leased, before its
    /// statement is sent): the handler must start reading at a message's first byte. A connection it could not be
    /// put on keeps the round trip.
    package static func install(on connection: PostgresConnection) async {
        if of(connection) != nil { return }
        guard let channel = channel(of: connection) else { return }
        let watch = CommitWatch()
        let added: Void? = try? await channel.eventLoop.submit {
            let pipeline = channel.pipeline.syncOperations
            // In front of postgres-nio's handler: behind TLS when there is TLS, otherwise first.
            let position: ChannelPipeline.SynchronousOperations.Position
            if let tls = try? pipeline.handler(type: NIOSSLClientHandler.self) {
                position = .after(tls)
            } else {
                position = .first
            }
            try pipeline.addHandler(UnaskedReadCompleteHandler(), position: position)
            try pipeline.addHandler(ReadyForQueryHandler(watch: watch), position: position)
        }.get()
        guard added != nil else { return }
        installed.withLockedValue { entries in
            // The entries of connections that are gone go with them (a pool's few connections: a short walk).
            entries = entries.filter { $0.value.connection != nil }
            entries[ObjectIdentifier(connection)] = Entry(connection: connection, watch: watch)
        }
    }
}

/// Reads the backend's messages as they pass to postgres-nio and tells the connection's ``CommitWatch``.
///
/// It passes them on in slices of whole messages, each ending at the first message boundary ``sliceBytes`` or more in,
/// and the read's last bytes in a slice of their own. A claim's rows arrive in reads of tens of kilobytes (TLS hands on
/// whatever one socket read decrypted, in a buffer grown to fit), usually ending inside a row. postgres-nio's decoder
/// keeps such an unfinished message by copying its buffer from there to the end of the buffer's storage, free space
/// included, then copies the whole next read in behind it: in the push daemon's profile on the field's drain, those
/// copies were a tenth of its CPU. A slice of whole messages is read to its end and dropped at no cost, so only the
/// read's last slice (at most a message and 2 KB) is ever copied.
final class ReadyForQueryHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    /// The smallest slice but a read's last (swift-nio's decoders reclaim their buffer's space from 2 KB read).
    static let sliceBytes = 2048

    private var framing = BackendMessageFraming()
    private let watch: CommitWatch

    init(watch: CommitWatch) { self.watch = watch }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let watch = self.watch
        var rest = unwrapInboundIn(data)
        while !framing.isLost {
            let view = rest.readableBytesView
            let end = framing.read(view, boundaryAfter: Self.sliceBytes) { signal in
                switch signal {
                case .completed: watch.completed()
                case .failed: watch.failed()
                case .ready: watch.ready()
                case .lost: watch.lose()
                }
            }
            // The last slice, and what follows a loss (unread), go on below.
            let length = view.distance(from: view.startIndex, to: end)
            guard !framing.isLost, length < rest.readableBytes else { break }
            context.fireChannelRead(wrapInboundOut(rest.readSlice(length: length)!))
        }
        // A slice too: a buffer TLS hands on spans its whole (grown) storage, and the decoder's copy of an unfinished
        // message at its end would copy all of that storage's free space with it.
        context.fireChannelRead(wrapInboundOut(rest.readSlice(length: rest.readableBytes)!))
    }

    func channelInactive(context: ChannelHandlerContext) {
        watch.close()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        watch.close()
    }
}

/// Whether a `channelReadComplete` may go on to postgres-nio now (a value: tested without a channel).
///
/// postgres-nio stops asking to read while a result's rows wait for its caller (backpressure), and it traps when a
/// read completes that it did not ask for (`RowStreamStateMachine`: "How can we receive a body part, after a
/// channelReadComplete, but no read has been forwarded yet"). That happens when the server's side closes the
/// connection while rows wait: NIO then reads what is left of the socket unasked and completes the read, and the
/// connection goes inactive in the same turn of the event loop. A crashed or restarted PostgreSQL (a failover) did that
/// to the push daemon in the middle of a large claim. So a completion nobody asked for is held until the end of that
/// turn: if the connection went inactive meanwhile it is dropped (the statement fails with the connection, as it
/// must); otherwise it goes on, as it always did.
struct ReadCompletions: Equatable {
    /// A read was asked for since the last completion went on (at first: a connection is installed idle, reading).
    private(set) var asked = true
    /// A completion nobody asked for, held.
    private(set) var held = false
    private(set) var inactive = false

    /// A read goes out.
    mutating func read() { asked = true }

    /// A read completed: whether it goes on now (else it is held: ``endOfTurn()`` says).
    mutating func readComplete() -> Bool {
        guard asked else {
            held = true
            return false
        }
        asked = false
        return true
    }

    mutating func channelInactive() { inactive = true }

    /// The end of the turn in which a completion was held: whether it goes on now.
    mutating func endOfTurn() -> Bool {
        defer { held = false }
        return held && !inactive
    }
}

/// Holds a read completion postgres-nio did not ask for (``ReadCompletions``).
final class UnaskedReadCompleteHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private var completions = ReadCompletions()

    func read(context: ChannelHandlerContext) {
        completions.read()
        context.read()
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if completions.readComplete() {
            context.fireChannelReadComplete()
            return
        }
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        context.eventLoop.execute {
            if handler.value.completions.endOfTurn() { bound.value.fireChannelReadComplete() }
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        completions.channelInactive()
        context.fireChannelInactive()
    }
}
