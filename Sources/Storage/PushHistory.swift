import Synchronization

/// Where rows go once the daemons are done with them (issue 31: the hot queue stays small): from `push_queue` to
/// `push_history`, moved by the statement that stamps them sent or failed, once `019_push_history_contract.sql` is
/// applied; before it (a release from before `push_history` may still run and read only `push_queue`) they are
/// stamped where they are, as that release does. `push_deliveries` shows both tables as one.
package enum PushHistory {
    /// The migration whose presence turns the move on.
    package static let contractVersion = 19

    /// The statement that says whether rows move (``contractVersion`` is applied).
    package static let activeQuery = "SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = \(contractVersion))"

    /// The columns both tables have, in one order.
    static let columns = [
        "message_id", "device_token", "payload", "time_queued", "time_sent", "attempts", "last_status", "last_error",
        "time_failed", "priority", "expiration", "collapse_id", "push_type", "claimed_by", "claimed_until",
        "notification_id", "topic", "app", "platform", "bulk",
    ]

    /// `INSERT INTO table (columns) SELECT … FROM source`: every column as `source` returned it, but those in
    /// `overrides` (column: SQL expression over `source`'s columns). The SQL is this file's callers' own, never input.
    package static func insert(into table: String, from source: String, overriding overrides: [String: String] = [:]) -> String {
        let values = columns.map { overrides[$0] ?? $0 }
        return "INSERT INTO \(table) (\(columns.joined(separator: ", "))) SELECT \(values.joined(separator: ", ")) FROM \(source)"
    }

    /// Whether this daemon moves the rows it is done with: false until the database says so (stamping in place is
    /// always correct; `queue prune` moves what was stamped in place later).
    package final class Mode: Sendable {
        private let active = Atomic(false)

        package init(moving: Bool = false) { active.store(moving, ordering: .relaxed) }

        package var moving: Bool { active.load(ordering: .relaxed) }

        func set(_ moving: Bool) { active.store(moving, ordering: .relaxed) }
    }
}
