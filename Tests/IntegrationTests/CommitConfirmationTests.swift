import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import PostgresNIO
import Settings
import Storage
import Testing

/// A statement is reported done only once PostgreSQL has committed it, and that costs no round trip of its own: the
/// connection's ``CommitWatch`` reads the ReadyForQuery the server sends after every statement.
@Suite(.serialized) struct CommitConfirmationTests {
    static let logger = Logger(label: "commit-confirmation-tests")

    /// On the test cluster's own connection (TLS when the cluster has it): the watch sits behind TLS, reads the
    /// framing, and confirms each statement without asking.
    @Test func theWatchReadsTheServersAnswersBehindTLS() async throws {
        try await TestDatabase.withFreshDatabase { url in
            try await TestDatabase.withConnection(url) { connection in
                #expect(CommitWatch.channel(of: connection) != nil, "postgres-nio's connection no longer has a stored `channel`")
                await CommitWatch.install(on: connection)
                let watch = try #require(CommitWatch.of(connection))
                for round in 0..<20 {
                    try await connection.query("CREATE TEMPORARY TABLE IF NOT EXISTS t (n int)", logger: Self.logger)
                    _ = try await connection.query("INSERT INTO t VALUES (\(round)) RETURNING n", logger: Self.logger).collect()
                    #expect(await watch.confirmation() == .committed)
                    try await connection.confirmCommitted(logger: Self.logger)
                }
            }
        }
    }

    /// Through a proxy that counts the server's ReadyForQuery messages: a confirmed statement is one request, not two.
    @Test func aConfirmedStatementIsOneRequest() async throws {
        try await TestDatabase.withFreshDatabase { url in
            try await Self.throughCutter(url) { proxied, cutter in
                try await TestDatabase.withConnection(proxied) { connection in
                    await CommitWatch.install(on: connection)
                    try await connection.query("CREATE TEMPORARY TABLE t (n int)", logger: Self.logger)
                    let before = cutter.readyCount
                    for round in 0..<10 {
                        try await connection.query("INSERT INTO t VALUES (\(round))", logger: Self.logger)
                        try await connection.confirmCommitted(logger: Self.logger)
                    }
                    #expect(cutter.readyCount - before == 10)
                }
            }
        }
    }

    /// The connection ends after the statement's CommandComplete and before its ReadyForQuery (the server stopping
    /// in between rolls the statement back, while postgres-nio has already returned it): the confirmation fails with
    /// an unknown outcome, never succeeds. Without a watch (the probe's round trip) the same.
    @Test(arguments: [true, false]) func aConnectionLostBeforeTheReadyIsNotConfirmed(watched: Bool) async throws {
        try await TestDatabase.withFreshDatabase { url in
            try await Self.throughCutter(url) { proxied, cutter in
                try await TestDatabase.withConnection(proxied) { connection in
                    if watched { await CommitWatch.install(on: connection) }
                    try await connection.query("CREATE TEMPORARY TABLE t (n int)", logger: Self.logger)
                    cutter.cutBeforeNextReady()
                    _ = try await connection.query("INSERT INTO t VALUES (1) RETURNING n", logger: Self.logger).collect()
                    let error = await #expect(throws: DatabaseError.self) {
                        try await connection.confirmCommitted(logger: Self.logger)
                    }
                    #expect(error?.code == .outcomeUnknown)
                    #expect(cutter.didCut)
                }
            }
        }
    }

    /// PostgreSQL refuses the commit after the statement's CommandComplete (a deferred foreign key that does not
    /// hold): an ErrorResponse comes between it and the ReadyForQuery. postgres-nio has already returned the statement;
    /// the watch tells the commit failed (nothing happened), and without a watch the probe never says it committed.
    @Test(arguments: [(true, true), (true, false), (false, true)])
    func aCommitRefusedAfterTheStatementIsNotConfirmed(watched: Bool, returning: Bool) async throws {
        try await TestDatabase.withFreshDatabase { url in
            try await TestDatabase.withConnection(url) { connection in
                if watched { await CommitWatch.install(on: connection) }
                try await connection.query("CREATE TABLE parent (id int PRIMARY KEY)", logger: Self.logger)
                try await connection.query(
                    "CREATE TABLE child (parent int REFERENCES parent DEFERRABLE INITIALLY DEFERRED)",
                    logger: Self.logger
                )
                let insert: PostgresQuery = returning ? "INSERT INTO child VALUES (1) RETURNING parent" : "INSERT INTO child VALUES (1)"
                _ = try await connection.query(insert, logger: Self.logger).collect()
                let error = await #expect(throws: DatabaseError.self, "a commit PostgreSQL refused was reported done") {
                    try await connection.confirmCommitted(logger: Self.logger)
                }
                if watched {
                    #expect(error?.code == .queryFailed, "the refusal is known: nothing happened")
                }
            }
            try await TestDatabase.withConnection(url) { connection in
                let rows = try await connection.query("SELECT count(*) FROM child", logger: Self.logger).collect()
                #expect(try rows.first?.decode(Int.self) == 0)
            }
        }
    }

    static func throughCutter(_ url: DatabaseURL, _ body: (DatabaseURL, ReadyCutter) async throws -> Void) async throws {
        let cutter = ReadyCutter(upstreamPort: url.port)
        try await cutter.start()
        var proxied = TestDatabase.through(url, port: cutter.port)
        proxied.tlsMode = .disable
        do {
            try await body(proxied, cutter)
        } catch {
            await cutter.stop()
            throw error
        }
        await cutter.stop()
    }
}

/// A loopback proxy in front of PostgreSQL (plain TCP) that passes the server's messages whole, counts its
/// ReadyForQuery messages and, when told, closes both sides in place of the next ReadyForQuery that follows a
/// CommandComplete.
final class ReadyCutter: Sendable {
    private struct State {
        var listener: (any Channel)?
        var connections: [any Channel] = []
        var port = 0
        var ready = 0
        var armed = false
        var cut = false
    }
    private let state = NIOLockedValueBox(State())
    let upstreamPort: Int

    init(upstreamPort: Int) { self.upstreamPort = upstreamPort }

    var port: Int { state.withLockedValue { $0.port } }
    var readyCount: Int { state.withLockedValue { $0.ready } }
    var didCut: Bool { state.withLockedValue { $0.cut } }

    func cutBeforeNextReady() { state.withLockedValue { $0.armed = true } }

    func start() async throws {
        let upstreamPort = self.upstreamPort
        let listener = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { [self] client in
                ClientBootstrap(group: client.eventLoop)
                    .connect(host: "127.0.0.1", port: upstreamPort)
                    .flatMapThrowing { server in
                        try client.pipeline.syncOperations.addHandler(Pass(partner: server))
                        try server.pipeline.syncOperations.addHandler(Messages(partner: client, cutter: self))
                        self.state.withLockedValue { $0.connections += [client, server] }
                    }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        state.withLockedValue {
            $0.listener = listener
            $0.port = listener.localAddress?.port ?? 0
        }
    }

    func stop() async {
        let (listener, connections) = state.withLockedValue { ($0.listener, $0.connections) }
        try? await listener?.close()
        for connection in connections { try? await connection.close() }
    }

    /// Whether the message goes on; counts and cuts.
    fileprivate func passes(_ type: UInt8, afterCompletion: Bool) -> Bool {
        state.withLockedValue { state in
            guard type == UInt8(ascii: "Z") else { return true }
            if state.armed && afterCompletion {
                state.armed = false
                state.cut = true
                return false
            }
            state.ready += 1
            return true
        }
    }

    private final class Pass: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        let partner: any Channel
        init(partner: any Channel) { self.partner = partner }
        func channelRead(context: ChannelHandlerContext, data: NIOAny) { partner.writeAndFlush(unwrapInboundIn(data), promise: nil) }
        func channelInactive(context: ChannelHandlerContext) { partner.close(promise: nil) }
        func errorCaught(context: ChannelHandlerContext, error: any Error) { context.close(promise: nil) }
    }

    /// The server's side: whole messages, in order.
    private final class Messages: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        let partner: any Channel
        let cutter: ReadyCutter
        var pending = ByteBuffer()
        var afterCompletion = false

        init(partner: any Channel, cutter: ReadyCutter) {
            self.partner = partner
            self.cutter = cutter
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            var bytes = unwrapInboundIn(data)
            pending.writeBuffer(&bytes)
            while pending.readableBytes >= 5, let type = pending.getInteger(at: pending.readerIndex, as: UInt8.self),
                let length = pending.getInteger(at: pending.readerIndex + 1, as: UInt32.self), pending.readableBytes >= Int(length) + 1
            {
                let message = pending.readSlice(length: Int(length) + 1)!
                guard cutter.passes(type, afterCompletion: afterCompletion) else {
                    partner.close(promise: nil)
                    context.close(promise: nil)
                    return
                }
                if type == UInt8(ascii: "C") { afterCompletion = true }
                if type == UInt8(ascii: "Z") { afterCompletion = false }
                partner.writeAndFlush(message, promise: nil)
            }
            pending.discardReadBytes()
        }

        func channelInactive(context: ChannelHandlerContext) { partner.close(promise: nil) }
        func errorCaught(context: ChannelHandlerContext, error: any Error) { context.close(promise: nil) }
    }
}
