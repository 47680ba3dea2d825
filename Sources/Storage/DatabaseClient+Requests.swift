package import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
package import PostgresNIO
import Support

extension DatabaseClient {
    /// The executor a request's work (the statement's rows decoded, the caller's body) runs on when the caller names
    /// one: a broadcast's lane names its threads at a lower priority (`push_broadcast_nice`). A preference set with
    /// `withTaskExecutorPreference` does not reach the unstructured task ``withConnection(_:)`` starts, so without this
    /// a broadcast's claims were decoded on the cooperative threads chat's run on, at chat's priority.
    @TaskLocal package static var executor: (any TaskExecutor)?

    /// Runs `body` on a pooled connection, in the two phases the type's documentation describes.
    ///
    /// Throws ``DatabaseError`` with code `unavailable` (nothing reached the server: the database is down, or no
    /// connection came within `leaseTimeout`), `outcomeUnknown` (the server never answered), or the server's error.
    package func withConnection<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) async throws -> T) async throws -> T {
        if !health.isUp { await health.waitUntilSettled() }
        guard health.isUp, let (pool, session, _) = current.withLockedValue({ $0 }) else {
            throw DatabaseError(code: .unavailable, context: "waiting for a database connection", reason: health.problem ?? "not connected")
        }
        let lease = NIOLockedValueBox(LeaseState<PostgresConnection>())
        let statementLimit = session.statementTimeout == .zero ? .seconds(60) : session.statementTimeout + .seconds(5)
        let answer = FirstAnswer<T>()
        let unknown: @Sendable (String) -> DatabaseError = { reason in
            DatabaseError(code: .outcomeUnknown, context: "waiting for the database's answer", reason: reason)
        }
        let overdue: @Sendable () -> DatabaseError = {
            unknown("no answer within \(statementLimit.formatted); the statement may or may not have been carried out")
        }
        let work = Task(executorPreference: Self.executor) {
            do {
                let value = try await pool.withConnection { connection in
                    guard lease.withLockedValue({ $0.connectionCame(connection) }) else { throw CancellationError() }
                    await CommitWatch.install(on: connection)
                    // The server's statement_timeout ends a statement before this; only a server that does not answer
                    // at all gets here.
                    let timer = connection.eventLoop.scheduleTask(in: .nanoseconds(statementLimit.nanoseconds)) {
                        guard let connection = lease.withLockedValue({ $0.statementOverdue() }) else { return }
                        let closing: EventLoopFuture<Void> = connection.close()
                        closing.whenComplete { _ in }
                        // postgres-nio does not always fail a query whose connection closes under it: the caller
                        // hears now, whatever the abandoned work then does.
                        answer.give(.failure(overdue()))
                    }
                    defer { timer.cancel() }
                    do {
                        return try await body(connection)
                    } catch  where lease.withLockedValue({ $0.isOverdue }) {
                        throw overdue()
                    }
                }
                answer.give(.success(value))
            } catch {
                answer.give(.failure(error))
            }
        }
        let unavailable: @Sendable () -> DatabaseError = {
            DatabaseError(
                code: .unavailable,
                context: "waiting for a database connection",
                reason: self.health.problem ?? "no connection within \(self.leaseTimeout.formatted)"
            )
        }
        let abandon: @Sendable () -> Void = {
            work.cancel()
            answer.give(.failure(unavailable()))
        }
        // Given up while still waiting for a connection: the caller hears at once, whatever the pool then does with
        // the cancelled request (a pool being replaced after an outage may never answer it).
        let stopWaiting: @Sendable () -> Void = {
            if lease.withLockedValue({ $0.stopWaiting() }) { abandon() }
        }
        // The database went away: a request still waiting stops waiting; one whose connection the server closed under
        // its statement hears that the outcome is unknown (postgres-nio never answers a query sent on a connection as
        // it closes: a claim in flight when PostgreSQL restarted kept the push daemon waiting for ever).
        let registration = health.whenDown {
            switch lease.withLockedValue({ $0.databaseWentDown(isClosed: { $0.isClosed }) }) {
            case .none:
                break
            case .abandon:
                abandon()
            case .outcomeUnknown:
                work.cancel()
                let reason = "the database closed the connection before it answered; the statement may or may not have been carried out"
                answer.give(.failure(unknown(reason)))
            }
        }
        let timer = MultiThreadedEventLoopGroup.singleton.any().scheduleTask(in: .nanoseconds(leaseTimeout.nanoseconds), stopWaiting)
        defer {
            timer.cancel()
            health.remove(registration)
        }
        do {
            return try await withTaskCancellationHandler {
                try await answer.value()
            } onCancel: {
                stopWaiting()
                work.cancel()
            }
        } catch {
            // Leased (or overdue): the server's error or the unknown outcome, as it is. Otherwise nothing was sent.
            if lease.withLockedValue({ $0.mayHaveReachedTheServer }) { throw error }
            throw unavailable()
        }
    }

    /// Runs one statement and collects its rows; with `committed`, answers only once PostgreSQL committed it (see
    /// ``PostgresConnection/confirmCommitted(logger:)``).
    package func query(_ query: PostgresQuery, logger: Logger, committed: Bool = false) async throws -> DatabaseRows {
        try await withConnection { connection in
            let rows = DatabaseRows(try await connection.query(query, logger: logger).collect())
            if committed { try await connection.confirmCommitted(logger: logger, prepared: self.session?.isPooled != true) }
            return rows
        }
    }

    /// Runs one of the hot statements: prepared once per connection when direct, unnamed behind a pooler (which may
    /// hand the next transaction a server connection that never saw the preparation). With `committed`, answers only
    /// once PostgreSQL committed it.
    package func execute<Statement: PostgresPreparedStatement>(
        _ statement: Statement,
        logger: Logger,
        committed: Bool = false
    ) async throws -> [Statement.Row]
    where Statement.Row: Sendable {
        try await withConnection { connection in
            // Read once the connection is leased (a request that came while the process started waited for it).
            if self.session?.isPooled == true {
                let query = PostgresQuery(unsafeSQL: Statement.sql, binds: try statement.makeBindings())
                let rows = try await connection.query(query, logger: logger).collect().map { try statement.decodeRow($0) }
                if committed { try await connection.confirmCommitted(logger: logger, prepared: false) }
                return rows
            }
            // postgres-nio remembers a statement whose preparation failed (a lock or statement timeout behind an
            // operator's open transaction) and fails it on that connection from then on: after any error the
            // connection is closed, so the pool opens a fresh one and the next request is served.
            do {
                var rows: [Statement.Row] = []
                for try await row in try await connection.execute(statement, logger: logger) { rows.append(row) }
                if committed { try await connection.confirmCommitted(logger: logger, prepared: true) }
                return rows
            } catch {
                try? await connection.close()
                throw error
            }
        }
    }
}

/// The first of a request's outcomes (its work's result, or giving up while it waited), once; later ones are dropped.
final class FirstAnswer<T: Sendable>: Sendable {
    private enum State {
        case pending
        case waiting(CheckedContinuation<T, any Error>)
        case answered(Result<T, any Error>)
        case delivered
    }
    private let state = NIOLockedValueBox(State.pending)

    func give(_ result: Result<T, any Error>) {
        let continuation: CheckedContinuation<T, any Error>? = state.withLockedValue { state in
            switch state {
            case .pending:
                state = .answered(result)
                return nil
            case .waiting(let continuation):
                state = .delivered
                return continuation
            case .answered, .delivered:
                return nil
            }
        }
        continuation?.resume(with: result)
    }

    func value() async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            let ready: Result<T, any Error>? = state.withLockedValue { state in
                switch state {
                case .answered(let result):
                    state = .delivered
                    return result
                case .pending:
                    state = .waiting(continuation)
                    return nil
                case .waiting, .delivered:
                    preconditionFailure("FirstAnswer.value() awaited twice")
                }
            }
            if let ready { continuation.resume(with: ready) }
        }
    }
}

/// A statement's rows, collected (the connection goes back to the pool before they are read).
package struct DatabaseRows: Sendable, Sequence {
    package let rows: [PostgresRow]

    init(_ rows: [PostgresRow]) { self.rows = rows }

    package var count: Int { rows.count }
    package func makeIterator() -> IndexingIterator<[PostgresRow]> { rows.makeIterator() }

    /// Every row decoded as the given columns.
    package func decode<each Column: PostgresDecodable>(_ columns: (repeat each Column).Type) throws -> [(repeat each Column)] {
        try rows.map { try $0.decode(columns) }
    }
}

extension PostgresConnection {
    /// Waits until the statement just run on this connection is committed.
    ///
    /// postgres-nio reports a statement done at its CommandComplete, which PostgreSQL sends before the implicit commit
    /// at the end of the request (Sync; ReadyForQuery then says it happened): a server stopped in between (`pg_ctl stop
    /// -m fast`, a restart) rolls the statement back while its caller already holds its rows. A push daemon's claim
    /// answered that way sent 200 rows that PostgreSQL then gave out again (CI, twice). postgres-nio starts the next
    /// request only after the last one's ReadyForQuery, so one more round trip succeeds exactly when the statement
    /// was committed; if it fails, the outcome is unknown.
    /// `prepared`: the probe is a statement prepared once per connection (not behind a transaction pooler, which may
    /// hand each transaction another server connection), so PostgreSQL parses it once, not per request.
    /// A connection with a ``CommitWatch`` (put on each pooled connection when it is leased) answers from the
    /// ReadyForQuery the server already sent, with no round trip; the probe is for a connection without one.
    package func confirmCommitted(logger: Logger, prepared: Bool = false) async throws {
        switch await CommitWatch.of(self)?.confirmation() {
        case .committed: return
        case .rolledBack: throw DatabaseError.commitFailed
        case .closed: throw DatabaseError.commitUnconfirmed
        case .unsure, nil: break
        }
        // postgres-nio never answers a query sent on a connection that has closed.
        if isClosed { throw DatabaseError.commitUnconfirmed }
        do {
            if prepared {
                for try await _ in try await execute(CommitProbe(), logger: logger) {}
            } else {
                _ = try await query("SELECT 1", logger: logger).collect()
            }
        } catch {
            throw DatabaseError.commitUnconfirmed
        }
    }
}

extension DatabaseError {
    /// PostgreSQL refused the commit after the statement ended (a deferred constraint, a serialization failure at
    /// commit): the transaction rolled back.
    static let commitFailed = DatabaseError(
        code: .queryFailed,
        context: "committing",
        reason: "PostgreSQL refused the commit after the statement had finished; nothing was carried out"
    )

    /// The connection ended between a statement's end and its commit's confirmation.
    static let commitUnconfirmed = DatabaseError(
        code: .outcomeUnknown,
        context: "waiting for the commit",
        reason: "the connection ended before PostgreSQL confirmed the commit; the statement may or may not have been carried out"
    )
}

/// The round trip that proves the statement before it committed (``PostgresConnection/confirmCommitted(logger:prepared:)``).
struct CommitProbe: PostgresPreparedStatement {
    static let sql = "SELECT 1"
    typealias Row = Int32

    func makeBindings() throws -> PostgresBindings { PostgresBindings() }
    func decodeRow(_ row: PostgresRow) throws -> Int32 { try row.decode(Int32.self) }
}
