import Testing

@testable import Storage

/// A request's lease (``LeaseState``): each event against each phase, without a database.
@Suite struct LeaseStateTests {
    final class Connection: Sendable {
        let closed: Bool
        init(closed: Bool = false) { self.closed = closed }
    }

    @Test func aConnectionThatComesIsUsedOnceAndNotAfterGivingUp() {
        var lease = LeaseState<Connection>()
        #expect(!lease.mayHaveReachedTheServer)
        let used = lease.connectionCame(Connection())
        #expect(used)
        #expect(lease.mayHaveReachedTheServer)
        let second = lease.connectionCame(Connection())
        #expect(!second, "a second connection is given back")

        var late = LeaseState<Connection>()
        let gaveUp = late.stopWaiting()
        let usedLate = late.connectionCame(Connection())
        #expect(gaveUp)
        #expect(!usedLate, "given up: the connection goes back, nothing is sent")
        #expect(!late.mayHaveReachedTheServer)
    }

    /// The lease timer or the caller leaving stops only a request still waiting, once.
    @Test func stoppingWaitingGivesUpOnlyAWaitingRequest() {
        var waiting = LeaseState<Connection>()
        let first = waiting.stopWaiting()
        let again = waiting.stopWaiting()
        #expect(first)
        #expect(!again, "given up once")

        var leased = LeaseState<Connection>()
        _ = leased.connectionCame(Connection())
        let stopped = leased.stopWaiting()
        #expect(!stopped, "a statement may be at the server: it goes on")
        #expect(leased.mayHaveReachedTheServer)
    }

    @Test func theDatabaseGoingDown() {
        var waiting = LeaseState<Connection>()
        let whileWaiting = waiting.databaseWentDown { $0.closed }
        let afterwards = waiting.connectionCame(Connection())
        #expect(whileWaiting == .abandon)
        #expect(!afterwards)

        var open = LeaseState<Connection>()
        _ = open.connectionCame(Connection(closed: false))
        let onOpen = open.databaseWentDown { $0.closed }
        #expect(onOpen == .none, "its connection still answers: the server decides")

        var closed = LeaseState<Connection>()
        _ = closed.connectionCame(Connection(closed: true))
        let onClosed = closed.databaseWentDown { $0.closed }
        #expect(onClosed == .outcomeUnknown)
        #expect(closed.mayHaveReachedTheServer)

        var given = LeaseState<Connection>()
        _ = given.stopWaiting()
        let onGiven = given.databaseWentDown { $0.closed }
        #expect(onGiven == .none)
    }

    /// The statement limit closes the leased connection once; it never touches a request without one.
    @Test func anOverdueStatementClosesItsConnectionOnce() {
        var lease = LeaseState<Connection>()
        let beforeLease = lease.statementOverdue()
        #expect(beforeLease == nil, "nothing leased, nothing to close")
        let connection = Connection()
        _ = lease.connectionCame(connection)
        #expect(!lease.isOverdue)
        let closing = lease.statementOverdue()
        #expect(closing === connection)
        #expect(lease.isOverdue)
        let again = lease.statementOverdue()
        #expect(again == nil, "closed once")
        #expect(lease.mayHaveReachedTheServer, "the statement may have run: its outcome is unknown")
        let down = lease.databaseWentDown { _ in true }
        #expect(down == .none, "already answered as unknown")
    }
}
