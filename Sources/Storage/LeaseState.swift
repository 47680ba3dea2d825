/// Where one request is with its pooled connection (``DatabaseClient/withConnection(_:)``), and what each event asks
/// to be done: the events come from five places at once (the pool handing over a connection, the lease timer, the
/// statement timer, the database going down, the caller cancelling), so the state is one value behind one lock whose
/// transitions return actions, carried out by the caller outside the lock.
///
/// Two phases: while `waiting` nothing has reached the server, and giving up answers `unavailable` (nothing
/// happened); once `leased`, what happens is the server's to decide, and only the server's word (or an unknown outcome)
/// is an answer.
struct LeaseState<Connection: AnyObject & Sendable>: Sendable {
    enum Phase: Sendable {
        /// Nothing has reached the server yet.
        case waiting
        /// The connection is the request's.
        case leased(Connection)
        /// The server did not answer within the statement limit: the connection was closed under the statement.
        case overdue
        /// Given up before a connection came (the database went down, the lease timed out, the caller left).
        case abandoned
    }

    private(set) var phase = Phase.waiting

    /// Whether a statement may have reached the server: a failure is then the server's or an unknown outcome, never
    /// `unavailable`.
    var mayHaveReachedTheServer: Bool {
        switch phase {
        case .leased, .overdue: true
        case .waiting, .abandoned: false
        }
    }

    /// The pool handed over a connection: use it, or give it back at once (the request was given up meanwhile).
    mutating func connectionCame(_ connection: Connection) -> Bool {
        guard case .waiting = phase else { return false }
        phase = .leased(connection)
        return true
    }

    /// The lease timed out or the caller left: true when the request was still waiting, so that it is given up (its
    /// work cancelled, `unavailable` answered); a request holding a connection goes on.
    mutating func stopWaiting() -> Bool {
        guard case .waiting = phase else { return false }
        phase = .abandoned
        return true
    }

    enum DownAction: Equatable {
        case none
        /// Still waiting: give up (`unavailable`).
        case abandon
        /// The server closed the connection under the statement: cancel the work and answer an unknown outcome
        /// (postgres-nio never answers a query sent on a connection as it closes).
        case outcomeUnknown
    }

    /// The database went down. `isClosed` tells whether the leased connection is closed.
    mutating func databaseWentDown(isClosed: (Connection) -> Bool) -> DownAction {
        switch phase {
        case .waiting:
            phase = .abandoned
            return .abandon
        case .leased(let connection):
            return isClosed(connection) ? .outcomeUnknown : .none
        case .overdue, .abandoned:
            return .none
        }
    }

    /// The statement limit passed with the connection still leased: the connection to close (its statement may still
    /// be running, so it is not given to anyone else), and the caller hears the outcome is unknown. Nil when the request
    /// holds no connection.
    mutating func statementOverdue() -> Connection? {
        guard case .leased(let connection) = phase else { return nil }
        phase = .overdue
        return connection
    }

    /// Whether the statement limit passed (the body's own error is then replaced by the unknown outcome).
    var isOverdue: Bool {
        if case .overdue = phase { return true }
        return false
    }
}
