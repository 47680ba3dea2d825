import PostgresNIO
import Synchronization

extension PushQueue {
    /// What a daemon learned about rows it holds, waiting to be recorded: sent, failed for good, given back,
    /// deferred (to try again later), and the tokens Apple called gone.
    package struct Results: Sendable, Equatable {
        package var sent: [Int64] = []
        package var failed: [Failure] = []
        package var released: [Int64] = []
        package var invalidTokens: [InvalidToken] = []
        package var deferred: [Deferral] = []

        package init() {}

        package var isEmpty: Bool { sent.isEmpty && failed.isEmpty && released.isEmpty && invalidTokens.isEmpty && deferred.isEmpty }

        /// Every row the results settle.
        package var ids: [Int64] { sent + failed.map(\.messageID) + released + deferred.map(\.messageID) }

        /// The same results, each kind's rows by message id.
        var inMessageOrder: Results {
            var sorted = self
            sorted.sent.sort()
            sorted.failed.sort { $0.messageID < $1.messageID }
            sorted.released.sort()
            sorted.deferred.sort { $0.messageID < $1.messageID }
            return sorted
        }

        package mutating func merge(_ other: Results) {
            sent += other.sent
            failed += other.failed
            released += other.released
            invalidTokens += other.invalidTokens
            deferred += other.deferred
        }
    }

    /// Records `results` whole or not at all: one statement when only one kind is present, else one transaction of
    /// one statement per kind. Returns how many deferred rows were failed instead (past ``retryLimit``).
    ///
    /// Safe to repeat after an error whose outcome is unknown: each statement only changes rows this daemon still
    /// holds in the state it left them, and a token report is an upsert.
    package func record(_ results: Results) async throws -> Int {
        do {
            return try await record(results, tokensKeyedByToken: false)
        } catch  where !results.invalidTokens.isEmpty && InvalidTokenUpsert.isOldKeyConflict(error) {
            // Before `migrate --contract`: a token of another app's report (nothing was written; see InvalidTokenUpsert).
            return try await record(results, tokensKeyedByToken: true)
        }
    }

    private func record(_ unsorted: Results, tokensKeyedByToken: Bool) async throws -> Int {
        // Rows in message id order, the order the claims, the lease keeper and the statements that take sets of rows
        // lock them in (issue 42: answers come in any order, and two orders make deadlocks).
        let results = unsorted.inMessageOrder
        var statements: [PostgresQuery] = []
        if !results.sent.isEmpty { statements.append(sentStatement(results.sent)) }
        if !results.failed.isEmpty { statements.append(failedStatement(results.failed)) }
        if !results.invalidTokens.isEmpty {
            statements.append(InvalidTokenUpsert.statement(results.invalidTokens, keyedByToken: tokensKeyedByToken))
        }
        if !results.released.isEmpty { statements.append(releaseStatement(results.released)) }
        // Last: its rows are the answer.
        if !results.deferred.isEmpty { statements.append(postponeStatement(results.deferred, limit: retryLimit)) }
        guard let last = statements.last else { return 0 }
        if statements.count == 1, !results.sent.isEmpty {
            // A batch's usual result: prepared, its plan kept.
            if history.moving {
                _ = try await runPrepared(SentStatement<SentMoving>(ids: results.sent, instance: instance))
            } else {
                _ = try await runPrepared(SentStatement<SentInPlace>(ids: results.sent, instance: instance))
            }
            return 0
        }
        let rows = statements.count == 1 ? try await run(last, committed: true) : try await runInTransaction(statements)
        if !results.released.isEmpty { rewind() }
        return results.deferred.isEmpty ? 0 : try Self.failedCount(rows)
    }

    /// Runs `statements` in one transaction on one connection; the last one's rows. Rolled back on any error.
    func runInTransaction(_ statements: [PostgresQuery]) async throws -> DatabaseRows {
        let logger = self.logger
        let body: @Sendable (PostgresConnection) async throws -> DatabaseRows = { connection in
            try await connection.query("BEGIN", logger: logger)
            do {
                var rows = DatabaseRows([])
                for statement in statements {
                    rows = DatabaseRows(try await connection.query(statement, logger: logger).collect())
                }
                try await connection.query("COMMIT", logger: logger)
                return rows
            } catch {
                await connection.rollBack(logger: logger)
                throw error
            }
        }
        switch source {
        case .pool(let client): return try await client.withConnection(body)
        case .database(let database): return try await database.withConnection(body)
        }
    }
}
