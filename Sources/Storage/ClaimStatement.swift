import PostgresNIO

/// The push daemon's claim (``PushQueue/claim(limit:bulkLimit:)``) as one statement with a fixed text, so that a
/// direct connection prepares it once and PostgreSQL keeps its plan: up to a tenth kept for a waiting broadcast's rows,
/// the other rows from their cursor, then a broadcast's from theirs, each locked (`SKIP LOCKED`) and updated by row
/// address under this daemon's lease. Its rows: the claimed notifications, then whether each is a broadcast's and how
/// many were kept for a broadcast.
struct ClaimStatement: PostgresPreparedStatement {
    static let sql = """
        WITH waiting AS (
            SELECT count(*) AS n FROM push_queue_candidates($1, $2, true, $4, $5)
        ), others AS (
            SELECT c AS ctid FROM push_queue_candidates($1, $2, false, $3, greatest(0, $6 - (SELECT n FROM waiting))) c
        ), broadcast AS (
            SELECT c AS ctid FROM push_queue_candidates($1, $2, true, $4,
                least($7, greatest(0, $8 - (SELECT count(*) FROM others)))) c
        )
        UPDATE push_queue q
        SET claimed_by = $9, claimed_until = now() + make_interval(secs => $10), attempts = q.attempts + 1
        WHERE q.ctid = ANY(ARRAY(SELECT ctid FROM others UNION ALL SELECT ctid FROM broadcast))
        RETURNING q.message_id, q.device_token, q.payload, q.priority, q.expiration, q.collapse_id, q.push_type, q.topic, q.time_queued,
            q.app, q.bulk, (SELECT n FROM waiting)
        """
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
