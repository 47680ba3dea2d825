import PostgresNIO

/// The push daemon's claim (``PushQueue/claim(limit:bulkLimit:)``): `push_queue_claim` (migrations/026_claim_function.sql)
/// called by a statement with a fixed text, so that a direct connection prepares it once and PostgreSQL keeps the
/// plans: up to a tenth kept for a waiting broadcast's rows, the other rows from their cursor, then a broadcast's from
/// theirs, each locked (`SKIP LOCKED`) and updated by row address under this daemon's lease. Its rows: the claimed
/// notifications, then whether each is a broadcast's and how many were kept for a broadcast.
///
/// In a function because its update must find the rows by address whatever the statistics say: prepared as a
/// statement, PostgreSQL kept the plan it made while the queue was nearly empty, a sequential scan, and went on
/// scanning every page of a queue that chat traffic had filled with dead rows (19,000 pages per claim; the chat
/// figure lost a fifth in the field bench). The function turns sequential scans off for its own statements.
struct ClaimStatement: PostgresPreparedStatement {
    static let sql = "SELECT * FROM push_queue_claim($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
    typealias Row = PostgresRow

    let app: String
    let platform: String
    /// Where the other rows' scan starts, and the broadcast's.
    let after: Int64
    let afterBulk: Int64
    /// The part kept for a waiting broadcast.
    let share: Int64
    /// The other rows' limit (0: none of them), the broadcast's cap, and the limit the broadcast's rows share with
    /// the others (0: none).
    let othersLimit: Int64
    let bulkCap: Int64
    let broadcastLimit: Int64
    let instance: String
    let leaseSeconds: Double

    func makeBindings() throws -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 10)
        bindings.append(app)
        bindings.append(platform)
        bindings.append(after)
        bindings.append(afterBulk)
        bindings.append(share)
        bindings.append(othersLimit)
        bindings.append(bulkCap)
        bindings.append(broadcastLimit)
        bindings.append(instance)
        bindings.append(leaseSeconds)
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> PostgresRow { row }
}

/// A batch's rows stamped sent, alone (a batch's usual result), with a fixed text so that a direct connection prepares
/// it once and PostgreSQL keeps its plan: moved to `push_history` when the database says rows move, else stamped in
/// place. Only rows this daemon still holds.
struct SentStatement<Shape: SentShape>: PostgresPreparedStatement {
    static var sql: String { Shape.sql }
    typealias Row = PostgresRow

    let ids: [Int64]
    let instance: String

    func makeBindings() throws -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 2)
        bindings.append(ids)
        bindings.append(instance)
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> PostgresRow { row }
}

/// The two texts of ``SentStatement``.
protocol SentShape: Sendable {
    static var sql: String { get }
}

enum SentMoving: SentShape {
    static let sql = """
        WITH done AS (DELETE FROM push_queue WHERE message_id = ANY($1) AND claimed_by = $2 RETURNING *)
        \(PushQueue.sentInsert)
        """
}

enum SentInPlace: SentShape {
    static let sql = "UPDATE push_queue SET time_sent = now(), last_status = NULL WHERE message_id = ANY($1) AND claimed_by = $2"
}
