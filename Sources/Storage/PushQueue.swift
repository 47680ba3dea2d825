package import APNs
package import Foundation
package import Logging
package import PostgresNIO
package import Settings
import Support
import Synchronization

/// The push daemon's statements on `push_queue` and `invalid_tokens`: claim a batch under a lease, mark a batch
/// sent or failed, give rows back, renew leases, and return rows whose daemon died. One statement per batch.
package struct PushQueue: Sendable {
    /// A row that failed for good, with its reason.
    package struct Failure: Sendable, Equatable {
        package let messageID: Int64
        package let status: String
        package let reason: String
        /// A short, bounded label for metrics (`invalid_token`, `BadDeviceToken`, …).
        package let kind: String

        package init(messageID: Int64, status: String, reason: String, kind: String? = nil) {
            self.messageID = messageID
            self.status = status
            self.reason = reason
            self.kind = kind ?? status
        }
    }

    /// A device token APNs called invalid, for the feedback job.
    package struct InvalidToken: Sendable, Equatable {
        package let token: String
        /// Apple's time; nil: the database's clock when recorded (never the daemon's).
        package let reportedAt: Date?
        package let source: String
        /// The app Apple said it is invalid for (only that app's devices are pruned).
        package let app: String

        package init(token: String, reportedAt: Date?, source: String, app: String? = nil) {
            self.token = token
            self.reportedAt = reportedAt
            self.source = source
            self.app = app ?? App.defaultName
        }
    }

    /// Where statements go: a pool of the caller's, or a ``DatabaseClient``, which knows when the database is away
    /// (a statement then fails at once instead of waiting), bounds the wait for a connection, and replaces its pool
    /// when the database comes back after an outage.
    enum Source: Sendable {
        case pool(PostgresClient)
        case database(DatabaseClient)
    }
    let source: Source
    /// Who claims: `host:pid`, stored in `claimed_by`.
    package let instance: String
    let lease: Duration
    let rescan: Duration
    let logger: Logger
    /// When retryable answers stop being retried.
    package var retryLimit = RetryLimit()
    /// The app whose rows this queue claims (until the daemon keeps connections per app, the default app's: the
    /// configuration's credentials must never send another app's rows).
    package var app = App.defaultName
    /// The platform whose rows it claims: each platform's sender has its own queue (its rows, its cursor).
    package var platform = Platform.apns
    /// Which of its lane's rows it claims: all (other rows first, a tenth kept for a waiting broadcast), only the rows
    /// other than a broadcast's (a connection of their own keeps chat's latency while a broadcast drains), or only a
    /// broadcast's.
    package var traffic = Traffic.all

    /// See ``traffic``.
    package enum Traffic: String, Sendable {
        case all, interactive, bulk
    }
    /// Where this daemon's next claim starts (shared by its connections): in the rows other than a broadcast's, and in a
    /// broadcast's (`bulk`), which a claim takes only after the others.
    let cursor: CursorBox
    let bulkCursor: CursorBox
    /// Whether rows this daemon is done with move to `push_history` (shared by every queue made from this one).
    package let history: PushHistory.Mode

    /// Holds the daemon's ``ClaimCursor``.
    final class CursorBox: Sendable {
        let value: Mutex<ClaimCursor>
        /// Whose rows the cursor walks (set by its claims), where ``PushQueue/probeBehindCursors()`` looks behind it.
        let lane = Mutex<CursorLane?>(nil)
        init(_ cursor: ClaimCursor) { value = Mutex(cursor) }

        func walks(_ walked: CursorLane) {
            lane.withLock { if $0 != walked { $0 = walked } }
        }
    }

    /// The rows one cursor walks: an app's on a platform, a broadcast's or the others.
    struct CursorLane: Sendable, Equatable {
        let app: String
        let platform: String
        let bulk: Bool
    }

    /// Every cursor of the daemon's queues (each lane's, each kind's), for what the NOTIFYs say (shared by every queue
    /// made from one).
    package final class Cursors: Sendable {
        /// Held weakly: a sender made again for an updated app leaves its old queue's cursors behind.
        private struct Entry: Sendable {
            weak let box: CursorBox?
        }
        private let boxes = Mutex<[Entry]>([])
        private let listening = Atomic(false)

        package init() {}

        func register(_ new: CursorBox...) {
            boxes.withLock { boxes in
                boxes.removeAll { $0.box == nil }
                boxes += new.map { Entry(box: $0) }
            }
        }

        /// Whether a LISTEN connection is up: NOTIFYs then say where rows appear behind the cursors.
        package var isListening: Bool { listening.load(ordering: .relaxed) }

        package func setListening(_ value: Bool) { listening.store(value, ordering: .relaxed) }

        /// Rows from `id` on became claimable (nil: somewhere, so every next claim starts from the start).
        package func rewind(below id: Int64?) {
            for entry in boxes.withLock({ $0 }) { entry.box?.value.withLock { $0.rewind(below: id ?? 0) } }
        }

        /// The cursors that have claimed past the start, with their lanes and where their next claims start.
        func pastTheStart() -> [(box: CursorBox, lane: CursorLane, after: Int64)] {
            boxes.withLock { $0 }.compactMap { entry in
                guard let box = entry.box, let lane = box.lane.withLock({ $0 }) else { return nil }
                let after = box.value.withLock { $0.after }
                return after > 0 ? (box, lane, after) : nil
            }
        }
    }
    /// See ``Cursors``.
    package let cursors: Cursors

    /// `rescan`: how long a backlog may be claimed past rows behind the cursor (see ``ClaimCursor``).
    package init(client: PostgresClient, instance: String, lease: Duration, rescan: Duration = .seconds(1), logger: Logger) {
        self.init(source: .pool(client), instance: instance, lease: lease, rescan: rescan, logger: logger)
    }

    /// A queue on `database`: each statement on the pool it has at the time, never waiting on a database that is away.
    package init(database: DatabaseClient, instance: String, lease: Duration, rescan: Duration = .seconds(1), logger: Logger) {
        self.init(source: .database(database), instance: instance, lease: lease, rescan: rescan, logger: logger)
    }

    init(
        source: Source,
        instance: String,
        lease: Duration,
        rescan: Duration,
        logger: Logger,
        history: PushHistory.Mode = PushHistory.Mode(),
        cursors: Cursors = Cursors()
    ) {
        self.source = source
        self.history = history
        self.cursors = cursors
        self.instance = instance
        self.lease = lease
        self.rescan = rescan
        self.logger = logger
        self.cursor = CursorBox(ClaimCursor(rescan: rescan))
        self.bulkCursor = CursorBox(ClaimCursor(rescan: rescan))
        cursors.register(cursor, bulkCursor)
    }

    var leaseSeconds: Double { lease.seconds }

    /// Runs one statement and collects its rows; with `committed`, answers only once PostgreSQL committed it (a claim
    /// or a stamp reported done but rolled back sends rows twice).
    func run(_ query: PostgresQuery, committed: Bool = false) async throws -> DatabaseRows {
        switch source {
        case .pool(let client):
            let logger = self.logger
            return try await client.withConnection { connection in
                await CommitWatch.install(on: connection)
                let rows = DatabaseRows(try await connection.query(query, logger: logger).collect())
                if committed { try await connection.confirmCommitted(logger: logger) }
                return rows
            }
        case .database(let database):
            return try await database.query(query, logger: logger, committed: committed)
        }
    }

    /// Runs one of the daemon's hot statements (the claim) and answers once PostgreSQL committed it: prepared once per
    /// connection when direct, so its plan is kept (planning it was a fifth of a claim's time in PostgreSQL, in the field
    /// bench's profile), unnamed behind a pooler.
    func runPrepared<Statement: PostgresPreparedStatement>(_ statement: Statement) async throws -> [Statement.Row]
    where Statement.Row: Sendable {
        if case .database(let database) = source { return try await database.execute(statement, logger: logger, committed: true) }
        let rows = try await run(PostgresQuery(unsafeSQL: Statement.sql, binds: try statement.makeBindings()), committed: true)
        return try rows.rows.map { try statement.decodeRow($0) }
    }

    /// The same queue for `app`'s rows on `platform`: its own claim cursor (one app's or platform's backlog never
    /// moves another's claims).
    package func forApp(_ app: String, platform: Platform = .apns) -> PushQueue {
        var queue = PushQueue(
            source: source,
            instance: instance,
            lease: lease,
            rescan: rescan,
            logger: logger,
            history: history,
            cursors: cursors
        )
        queue.retryLimit = retryLimit
        queue.app = app
        queue.platform = platform
        return queue
    }

    /// The same lane's `traffic` only, with cursors of its own.
    package func forTraffic(_ traffic: Traffic) -> PushQueue {
        var queue = forApp(app, platform: platform)
        queue.traffic = traffic
        return queue
    }

    /// Asks the database whether rows move to `push_history` yet (``PushHistory``); the answer holds until the next call.
    @discardableResult
    package func refreshHistoryMode() async throws -> Bool {
        let rows = try await run(PostgresQuery(unsafeSQL: PushHistory.activeQuery))
        var moving = false
        for exists in try rows.decode(Bool.self) { moving = exists }
        history.set(moving)
        return moving
    }

    /// Whether this queue's app has rows waiting that nobody holds (an app's connection opens only then).
    package func hasUnclaimed() async throws -> Bool {
        let rows = try await run(
            """
            SELECT EXISTS (SELECT 1 FROM push_queue
                           WHERE app = \(app) AND platform = \(platform.rawValue) AND time_sent IS NULL AND time_failed IS NULL AND claimed_until IS NULL
                               AND (\(traffic == .all) OR bulk = \(traffic == .bulk)))
            """
        )
        for exists in try rows.decode(Bool.self) { return exists }
        return false
    }

    /// One app and platform's rows that are due (not deferred after a 429 or 503), for an enabled app.
    package struct Lane: Sendable, Equatable {
        package let app: String
        package let platform: String
        package let pending: Int
        package let oldestAge: Double
    }

    /// What the metrics show of the queue: the rows waiting to be sent (deferred ones too) and how many seconds the
    /// oldest has waited, and every enabled app's lanes (each platform, 0 when nothing is due: the series exist before
    /// the first row does).
    package struct Sample: Sendable, Equatable {
        package var count = 0
        package var oldestAge = 0.0
        package var lanes: [Lane] = []
    }

    /// Samples the queue for the metrics in one pass over the waiting rows (two passes, one per figure, cost a
    /// quarter of a 200,000-row drain's time in PostgreSQL in the field bench).
    package func sample() async throws -> Sample {
        let rows = try await run(
            """
            WITH waiting AS (
                SELECT app, platform, time_queued,
                       NOT coalesce(claimed_by = 'retry-later' AND claimed_until > now(), false) AS due
                FROM push_queue WHERE time_sent IS NULL AND time_failed IS NULL
            ), counted AS (
                SELECT app, platform, count(*) AS n, min(time_queued) AS oldest,
                       count(*) FILTER (WHERE due) AS due, min(time_queued) FILTER (WHERE due) AS due_oldest
                FROM waiting GROUP BY app, platform
            ), lanes AS (
                SELECT a.name AS app, p.platform FROM apps a CROSS JOIN (VALUES ('apns'), ('fcm'), ('web')) AS p (platform)
                WHERE a.disabled_at IS NULL
            )
            SELECT coalesce(c.app, l.app), coalesce(c.platform, l.platform), l.app IS NOT NULL, coalesce(c.n, 0),
                   coalesce(extract(epoch FROM now() - c.oldest), 0)::float8, coalesce(c.due, 0),
                   coalesce(extract(epoch FROM now() - c.due_oldest), 0)::float8
            FROM counted c FULL JOIN lanes l ON l.app = c.app AND l.platform = c.platform
            ORDER BY 1, 2
            """
        )
        var sample = Sample()
        for (app, platform, isLane, count, age, due, dueAge) in try rows.decode((String, String, Bool, Int64, Double, Int64, Double).self) {
            sample.count += Int(count)
            sample.oldestAge = max(sample.oldestAge, age)
            if isLane { sample.lanes.append(Lane(app: app, platform: platform, pending: Int(due), oldestAge: dueAge)) }
        }
        return sample
    }

    /// Claims up to `limit` pending, unclaimed rows, oldest first (from the cursor while a backlog drains): rows other
    /// than a broadcast's first, then a broadcast's (`bulk`) up to the limit, so chat keeps its latency while a broadcast
    /// drains; while a broadcast's rows wait, a tenth of the claim is kept for them (``broadcastShare(of:)``), so a steady
    /// flood of chat does not starve a broadcast. The second scan takes only what the first left of the limit (nothing: it reads no row).
    ///
    /// The rows are locked (`SKIP LOCKED`: another daemon's claim in progress is passed over, not waited for) and
    /// updated by their row address (`ctid`, a TID scan: no second index lookup per row). Held by this statement's
    /// lock, a locked row cannot move before the update; one that another session changed after this statement's
    /// snapshot is not updated and stays pending for the next claim.
    ///
    /// `bulkLimit` caps the broadcast rows of this claim (`push_broadcast_rate`'s share; nil: no cap).
    package func claim(limit: Int, bulkLimit: Int? = nil) async throws -> [QueuedNotification] {
        let now = ContinuousClock.now
        let listening = cursors.isListening
        cursor.walks(CursorLane(app: app, platform: platform.rawValue, bulk: false))
        bulkCursor.walks(CursorLane(app: app, platform: platform.rawValue, bulk: true))
        let claim = cursor.value.withLock { $0.begin(now: now, listening: listening) }
        let bulkClaim = bulkCursor.value.withLock { $0.begin(now: now, listening: listening) }
        // A claim that fails moves neither cursor; one that succeeded has ended where it moved one (a no-op here).
        defer {
            cursor.value.withLock { $0.abandoned(claim) }
            bulkCursor.value.withLock { $0.abandoned(bulkClaim) }
        }
        let bulkCap = min(limit, max(0, bulkLimit ?? limit))
        let share = traffic == .all ? min(Self.broadcastShare(of: limit), bulkCap) : 0
        let rows = try await runPrepared(
            ClaimStatement(
                app: app,
                platform: platform.rawValue,
                after: claim.after,
                afterBulk: bulkClaim.after,
                share: Int64(share),
                othersLimit: Int64(traffic == .bulk ? 0 : limit),
                bulkCap: Int64(bulkCap),
                broadcastLimit: Int64(traffic == .interactive ? 0 : limit),
                instance: instance,
                leaseSeconds: leaseSeconds
            )
        )
        var claimed: [QueuedNotification] = []
        claimed.reserveCapacity(limit)
        var (bulkCount, newest, newestBulk, reserved): (Int, Int64?, Int64?, Int) = (0, nil, nil, 0)
        // Column by column: decoding the row as one tuple looked up generic metadata for every row, a third of the
        // daemon's CPU in a binary drain.
        for row in rows {
            var cells = row.makeIterator()
            func column<Value: PostgresDecodable>(_: Value.Type) throws -> Value {
                guard let cell = cells.next() else {
                    throw DatabaseError(code: .queryFailed, context: "claiming notifications", reason: "a row has too few columns")
                }
                return try cell.decode(Value.self)
            }
            claimed.append(
                QueuedNotification(
                    messageID: try column(Int64.self),
                    deviceToken: try column(String.self),
                    payload: try column(String.self),
                    priority: try column(Int16?.self).map(Int.init),
                    expiration: try column(Date?.self),
                    collapseID: try column(String?.self),
                    pushType: try column(String?.self),
                    topic: try column(String?.self),
                    queuedAt: try column(Date.self),
                    app: try column(String.self).nilIfDefaultApp
                )
            )
            let id = claimed[claimed.count - 1].messageID
            if try column(Bool.self) {
                claimed[claimed.count - 1].bulk = true
                bulkCount += 1
                newestBulk = max(newestBulk ?? id, id)
            } else {
                newest = max(newest ?? id, id)
            }
            reserved = Int(try column(Int64.self))
        }
        // Each cursor moves by what its scan returned: the other rows' scan ran for the limit less the broadcast's share,
        // the broadcast's for what the first left over.
        let others = claimed.count - bulkCount
        if traffic != .bulk { cursor.value.withLock { $0.claimed(claim, count: others, limit: limit - reserved, newest: newest) } }
        if traffic != .interactive && others < limit && bulkCap > 0 {
            bulkCursor.value.withLock {
                $0.claimed(bulkClaim, count: bulkCount, limit: min(bulkCap, limit - others), newest: newestBulk)
            }
        }
        claimed.sort { $0.messageID < $1.messageID }
        return claimed
    }

    /// The part of a claim kept for a broadcast's rows while other rows wait too (a tenth): other rows come first, but a
    /// steady flood of them never stops a broadcast.
    static func broadcastShare(of limit: Int) -> Int { max(1, limit / 10) }

    /// Stamps `time_sent` on rows this daemon holds.
    package func markSent(_ ids: [Int64]) async throws {
        guard !ids.isEmpty else { return }
        _ = try await run(sentStatement(ids))
    }

    /// The text of ``SentStatement``, unnamed (in a transaction with other results, or run as is).
    func sentStatement(_ ids: [Int64]) -> PostgresQuery {
        var bindings = PostgresBindings(capacity: 2)
        bindings.append(ids)
        bindings.append(instance)
        return PostgresQuery(unsafeSQL: history.moving ? SentMoving.sql : SentInPlace.sql, binds: bindings)
    }

    static let sentInsert = PushHistory.insert(
        into: "push_history",
        from: "done",
        overriding: ["time_sent": "now()", "last_status": "NULL"]
    )

    /// Gives rows up for good, keeping the reason.
    package func markFailed(_ failures: [Failure]) async throws {
        guard !failures.isEmpty else { return }
        _ = try await run(failedStatement(failures))
    }

    func failedStatement(_ failures: [Failure]) -> PostgresQuery {
        let (ids, statuses, reasons) = (failures.map(\.messageID), failures.map(\.status), failures.map(\.reason))
        guard history.moving else {
            return """
                UPDATE push_queue q SET time_failed = now(), last_status = f.status, last_error = f.reason, claimed_until = NULL
                FROM unnest(\(ids)::int8[], \(statuses)::text[], \(reasons)::text[]) AS f(id, status, reason)
                WHERE q.message_id = f.id
                """
        }
        return """
            WITH done AS (
                DELETE FROM push_queue q USING unnest(\(ids)::int8[], \(statuses)::text[], \(reasons)::text[]) AS f(id, status, reason)
                WHERE q.message_id = f.id RETURNING q.*, f.status AS f_status, f.reason AS f_reason
            )
            \(unescaped: Self.failedInsert)
            """
    }

    /// A failed row as `push_history` keeps it (`done` has the row and `f_status`, `f_reason`).
    static let failedInsert = PushHistory.insert(
        into: "push_history",
        from: "done",
        overriding: ["time_failed": "now()", "last_status": "f_status", "last_error": "f_reason", "claimed_until": "NULL"]
    )

    /// Puts rows back in the queue (not sent, to be claimed again), e.g. at shutdown.
    package func release(_ ids: [Int64]) async throws {
        guard !ids.isEmpty else { return }
        _ = try await run(releaseStatement(ids))
        rewind()
    }

    /// The safety net while the daemon listens (``ClaimCursor``): asks each cursor's lane for a claimable row behind
    /// it that no NOTIFY announced (one an operator's statement held locked as a claim passed over it) and rewinds the
    /// cursor to the first. It reads without locking and runs from the lease keeper, not in a claim, so no claim waits
    /// for its walk over the rows claimed since; the claims themselves no longer go back to the start (chat's did once
    /// a minute, and during a broadcast that claim was chat's slowest: 0.7 s). Returns how many cursors it rewound.
    @discardableResult
    package func probeBehindCursors() async throws -> Int {
        var rewound = 0
        for target in cursors.pastTheStart() {
            let rows = try await run(
                """
                SELECT min(message_id) FROM push_queue
                WHERE time_sent IS NULL AND time_failed IS NULL AND claimed_until IS NULL
                  AND app = \(target.lane.app) AND platform = \(target.lane.platform) AND bulk = \(target.lane.bulk)
                  AND message_id <= \(target.after)
                """
            )
            for id in try rows.decode(Int64?.self) {
                guard let id else { continue }
                target.box.value.withLock { $0.rewind(below: id) }
                rewound += 1
            }
        }
        return rewound
    }

    /// Rows were given back: the next claim looks from the start of both scans.
    func rewind() {
        cursor.value.withLock { $0.rewind() }
        bulkCursor.value.withLock { $0.rewind() }
    }

    /// Gives the rows back and says where with a NOTIFY: the other daemons' cursors may be past them. `claimed_by` goes
    /// too: a lease renewal whose list was read before this committed (the lease keeper runs beside result recording)
    /// renews only rows still named by this daemon, so it cannot take them back. It did, for a whole lease: a daemon
    /// stopped with SIGTERM left rows it had given back leased to itself.
    func releaseStatement(_ ids: [Int64]) -> PostgresQuery {
        """
        WITH r AS (
            UPDATE push_queue SET claimed_until = NULL, claimed_by = NULL
            WHERE message_id = ANY(\(ids)) AND claimed_by = \(instance) AND time_sent IS NULL
            RETURNING message_id
        )
        SELECT pg_notify('push_queue', min(message_id)::text) IS NULL FROM r HAVING count(*) > 0
        """
    }

    /// A row to try again later, with the answer that made it wait.
    package struct Deferral: Sendable, Equatable {
        package let messageID: Int64
        package let delay: Duration
        package let status: String
        package let reason: String
        /// Exponential backoff: `delay` doubles with each attempt the row has had (at most ``maximumGrowingDelay``).
        package let growing: Bool

        package init(messageID: Int64, delay: Duration, status: String, reason: String, growing: Bool = false) {
            self.messageID = messageID
            self.delay = delay
            self.status = status
            self.reason = reason
            self.growing = growing
        }
    }

    /// The longest a growing deferral waits.
    static let maximumGrowingDelay: Duration = .seconds(60)

    /// How long retryable answers (429, 5xx) are tried again before a row is failed.
    package struct RetryLimit: Sendable, Equatable {
        /// Attempts (writes to APNs) after which a retryable answer fails the row (`push_max_attempts`).
        package var attempts: Int
        /// Age after which a retryable answer fails a row that has no expiration of its own (or 0, "once")
        /// (`push_max_age`); a row with an expiration is failed `expired` once past it.
        package var age: Duration

        package init(attempts: Int = 10, age: Duration = .seconds(86_400)) {
            self.attempts = attempts
            self.age = age
        }
    }

    /// Keeps rows off the queue for their delay (an unrenewed lease: ``reclaimExpired()`` returns them), recording
    /// why in `last_status`/`last_error`; a row past ``RetryLimit`` is failed instead (`last_error` says so).
    /// Returns how many were failed.
    @discardableResult
    package func postpone(_ deferrals: [Deferral], limit: RetryLimit = RetryLimit()) async throws -> Int {
        guard !deferrals.isEmpty else { return 0 }
        return try Self.failedCount(await run(postponeStatement(deferrals, limit: limit)))
    }

    func postponeStatement(_ deferrals: [Deferral], limit: RetryLimit) -> PostgresQuery {
        let seconds = deferrals.map(\.delay.seconds)
        return """
            WITH d AS (
                SELECT * FROM unnest(\(deferrals.map(\.messageID))::int8[], \(seconds)::float8[], \(deferrals.map(\.status))::text[],
                    \(deferrals.map(\.reason))::text[], \(deferrals.map(\.growing))::bool[]) AS d(id, seconds, status, reason, growing)
            ), judged AS (
                SELECT q.message_id, d.status, d.reason,
                       CASE WHEN d.growing
                            THEN least(\(Self.maximumGrowingDelay.seconds), d.seconds * power(2, least(greatest(q.attempts - 1, 0), 20)))
                            ELSE d.seconds END AS seconds,
                       q.attempts >= \(limit.attempts)
                       OR ((q.expiration IS NULL OR q.expiration <= q.time_queued)
                           AND q.time_queued < now() - make_interval(secs => \(limit.age.seconds))) AS give_up,
                       q.attempts
                FROM push_queue q JOIN d ON q.message_id = d.id
                WHERE q.claimed_by = \(instance) AND q.time_sent IS NULL AND q.time_failed IS NULL
            )
            \(unescaped: history.moving ? Self.postponeMoving : Self.postponeInPlace)
            """
    }

    /// The end of ``postponeStatement(_:limit:)`` stamping rows in place.
    static let postponeInPlace = """
        UPDATE push_queue q SET
            claimed_by = CASE WHEN j.give_up THEN q.claimed_by ELSE 'retry-later' END,
            claimed_until = CASE WHEN j.give_up THEN NULL ELSE now() + make_interval(secs => j.seconds) END,
            time_failed = CASE WHEN j.give_up THEN now() END,
            last_status = j.status,
            last_error = CASE WHEN j.give_up THEN 'gave up after ' || j.attempts || ' attempts: ' || j.reason ELSE j.reason END
        FROM judged j WHERE q.message_id = j.message_id
        RETURNING j.give_up
        """

    /// The end of ``postponeStatement(_:limit:)`` moving the rows it gives up on to `push_history`.
    static let postponeMoving = """
        , later AS (
            UPDATE push_queue q SET claimed_by = 'retry-later', claimed_until = now() + make_interval(secs => j.seconds),
                last_status = j.status, last_error = j.reason
            FROM judged j WHERE q.message_id = j.message_id AND NOT j.give_up
            RETURNING false AS give_up
        ), done AS (
            DELETE FROM push_queue q USING judged j WHERE q.message_id = j.message_id AND j.give_up
            RETURNING q.*, j.status AS f_status, 'gave up after ' || j.attempts || ' attempts: ' || j.reason AS f_reason
        ), moved AS (
            \(PushQueue.failedInsert) RETURNING true AS give_up
        )
        SELECT give_up FROM later UNION ALL SELECT give_up FROM moved
        """

    /// How many rows ``postponeStatement(_:limit:)`` failed instead of deferring.
    static func failedCount(_ rows: DatabaseRows) throws -> Int {
        var failed = 0
        for giveUp in try rows.decode(Bool.self) where giveUp { failed += 1 }
        return failed
    }

    /// Extends the lease of rows still in flight. A row another statement holds is skipped, never waited for: it is
    /// being recorded (its answer came: it needs no new lease) or an operator's statement has it; waiting would make
    /// the lease keeper one end of a deadlock with result recording (issue 42). A row whose lease ran out and which
    /// another daemon returned to the queue (it keeps `claimed_by`) is taken back if nobody claimed it meanwhile: this
    /// daemon wrote it. A row this daemon gave back (``release(_:)`` clears `claimed_by`) is not.
    package func renew(_ ids: [Int64]) async throws {
        guard !ids.isEmpty else { return }
        _ = try await run(
            """
            WITH free AS (
                SELECT message_id FROM push_queue
                WHERE message_id = ANY(\(ids)) AND claimed_by = \(instance) AND time_sent IS NULL AND time_failed IS NULL
                ORDER BY message_id FOR UPDATE SKIP LOCKED
            )
            UPDATE push_queue q SET claimed_until = now() + make_interval(secs => \(leaseSeconds))
            FROM free WHERE q.message_id = free.message_id
            """
        )
    }

    /// Returns rows whose lease ran out (their daemon died or lost the database) to the queue; the count. Rows this
    /// daemon still holds (`held`: written, their answers not yet recorded) stay with it whatever their lease says:
    /// after an outage longer than the lease they would otherwise be claimed and sent again. A row another statement
    /// holds is skipped, never waited for (as in ``renew(_:)``): the next round looks again.
    @discardableResult
    package func reclaimExpired(keeping held: [Int64] = []) async throws -> Int {
        // The NOTIFY says where they are: every daemon's cursors may be past them.
        let rows = try await run(
            """
            WITH expired AS (
                SELECT message_id FROM push_queue
                WHERE time_sent IS NULL AND time_failed IS NULL AND claimed_until < now()
                  AND NOT (claimed_by = \(instance) AND message_id = ANY(\(held)))
                ORDER BY message_id FOR UPDATE SKIP LOCKED
            ), r AS (
                UPDATE push_queue q SET claimed_until = NULL FROM expired
                WHERE q.message_id = expired.message_id AND q.claimed_until < now()
                RETURNING q.message_id
            )
            SELECT count(*), pg_notify('push_queue', min(message_id)::text) IS NULL FROM r HAVING count(*) > 0
            """
        )
        var count = 0
        for (returned, _) in try rows.decode((Int64, Bool).self) { count = Int(returned) }
        if count > 0 { rewind() }
        return count
    }

    /// Records tokens APNs called invalid (the newest report wins and is processed again).
    package func recordInvalidTokens(_ tokens: [InvalidToken]) async throws {
        guard !tokens.isEmpty else { return }
        do {
            _ = try await run(InvalidTokenUpsert.statement(tokens, keyedByToken: false))
        } catch  where InvalidTokenUpsert.isOldKeyConflict(error) {
            _ = try await run(InvalidTokenUpsert.statement(tokens, keyedByToken: true))
        }
    }
}

extension String {
    /// nil for the default app's name (a row of the default app stores nothing extra in memory).
    fileprivate var nilIfDefaultApp: String? { self == App.defaultName ? nil : self }
}
