import APNs
import Foundation
import PostgresNIO
import Testing

@testable import Settings
@testable import Storage

/// The push daemon's claims against PostgreSQL: a backlog claimed from a cursor, and every row that becomes
/// claimable behind it (given back, returned by someone else, an open snapshot's neighbour) still found.
@Suite struct ClaimTests {
    /// `body` gets a queue of `rows` pending rows with a running pool.
    static func withQueue(
        rows: Int,
        rescan: Duration = .seconds(1),
        _ body: @Sendable (PushQueue, DatabaseURL) async throws -> Void
    )
        async throws
    {
        try await TestDatabase.withFreshDatabase { url in
            try await TestDatabase.withConnection(url) { connection in
                try await connection.query(
                    "INSERT INTO push_queue (device_token, payload) SELECT repeat('a', 64), '{}' FROM generate_series(1, \(rows))",
                    logger: TestDatabase.logger
                )
            }
            let client = Database.makeClient(url: url, applicationName: "claim-test", keepOpen: false, logger: TestDatabase.logger)
            try await withThrowingDiscardingTaskGroup { group in
                group.addTask { await client.run() }
                let queue = PushQueue(client: client, instance: "test:1", lease: .seconds(30), rescan: rescan, logger: TestDatabase.logger)
                try await body(queue, url)
                group.cancelAll()
            }
        }
    }

    static func ids(_ queue: PushQueue, _ limit: Int) async throws -> [Int64] {
        try await queue.claim(limit: limit).map(\.messageID)
    }

    /// Another session makes a row claimable again (as `queue retry-failed` or an expired lease would).
    static func free(_ id: Int64, url: DatabaseURL) async throws {
        try await TestDatabase.withConnection(url) { connection in
            try await connection.query("UPDATE push_queue SET claimed_until = NULL WHERE message_id = \(id)", logger: TestDatabase.logger)
        }
    }

    @Test func aBacklogIsClaimedInOrderAndRowsGivenBackComeFirstAgain() async throws {
        try await Self.withQueue(rows: 10) { queue, _ in
            #expect(try await Self.ids(queue, 4) == [1, 2, 3, 4])
            #expect(try await Self.ids(queue, 4) == [5, 6, 7, 8])
            try await queue.release([2, 3])
            #expect(try await Self.ids(queue, 4) == [2, 3, 9, 10], "given back: the next claim starts from the start")
        }
    }

    /// The lease keeper renews from a list it read before result recording gave some rows back (they run side by
    /// side): those stay given back, claimable by any daemon. Rows whose lease ran out and that another daemon
    /// returned to the queue (unclaimed since) are taken back: this daemon wrote them.
    @Test func aRenewalFromAnOlderListDoesNotTakeBackRowsGivenBack() async throws {
        try await Self.withQueue(rows: 6) { queue, url in
            let held = try await Self.ids(queue, 6)
            try await queue.release([2, 3])
            for id: Int64 in [4, 5] { try await Self.free(id, url: url) }
            try await queue.renew(held)
            let free = try await TestDatabase.withConnection(url) { connection in
                try await connection.query(
                    "SELECT message_id FROM push_queue WHERE claimed_until IS NULL ORDER BY message_id",
                    logger: TestDatabase.logger
                ).collect().map { try $0.decode(Int64.self) }
            }
            #expect(free == [2, 3])
        }
    }

    @Test func aRowFreedBehindTheCursorIsFoundAtTheEndOfTheQueue() async throws {
        try await Self.withQueue(rows: 10, rescan: .seconds(60)) { queue, url in
            #expect(try await Self.ids(queue, 4) == [1, 2, 3, 4])
            try await Self.free(3, url: url)
            #expect(try await Self.ids(queue, 4) == [5, 6, 7, 8], "a backlog goes on from the cursor")
            #expect(try await Self.ids(queue, 4) == [9, 10], "the end of the queue")
            #expect(try await Self.ids(queue, 4) == [3], "then a claim from the start finds what was freed behind")
        }
    }

    @Test func aRowFreedBehindTheCursorWaitsAtMostTheRescanIntervalInABacklog() async throws {
        try await Self.withQueue(rows: 40, rescan: .milliseconds(300)) { queue, url in
            #expect(try await Self.ids(queue, 4) == [1, 2, 3, 4])
            try await Self.free(2, url: url)
            try await Task.sleep(for: .milliseconds(350))
            #expect(try await Self.ids(queue, 4) == [2, 5, 6, 7])
        }
    }

    /// While the daemon listens, claims never go back to the start on their own: a row whose transaction committed after
    /// the cursor passed its id is found through its NOTIFY, which carries the id (as the daemon's listener does).
    @Test func aLateCommitBehindTheCursorIsFoundThroughItsNotify() async throws {
        try await Self.withQueue(rows: 0) { queue, url in
            queue.cursors.setListening(true)
            try await TestDatabase.withConnection(url) { listener in
                try await listener.listen(on: "push_queue") { notifications in
                    var payloads = notifications.makeAsyncIterator()
                    try await TestDatabase.withConnection(url) { late in
                        try await late.query("BEGIN", logger: TestDatabase.logger)
                        try await late.query(
                            "INSERT INTO push_queue (device_token, payload) VALUES ('late', '{}')",
                            logger: TestDatabase.logger
                        )
                        try await TestDatabase.withConnection(url) { writer in
                            try await writer.query(
                                "INSERT INTO push_queue (device_token, payload) SELECT 'b', '{}' FROM generate_series(1, 8)",
                                logger: TestDatabase.logger
                            )
                        }
                        #expect(try await payloads.next()?.payload == "2")
                        #expect(try await Self.ids(queue, 4) == [2, 3, 4, 5], "row 1 is not committed yet")
                        try await late.query("COMMIT", logger: TestDatabase.logger)
                    }
                    let notification = try await payloads.next()
                    #expect(notification?.payload == "1")
                    queue.cursors.rewind(below: notification.flatMap { Int64($0.payload) })
                    #expect(try await Self.ids(queue, 4) == [1, 6, 7, 8], "the late row first, then on from the cursor")
                }
            }
        }
    }

    /// Rows given back and rows returned from an expired lease say where they are, for the other daemons' cursors.
    @Test func rowsGivenBackOrReturnedNotifyTheirLowestMessageID() async throws {
        try await Self.withQueue(rows: 10) { queue, url in
            try await TestDatabase.withConnection(url) { listener in
                try await listener.listen(on: "push_queue") { notifications in
                    var payloads = notifications.makeAsyncIterator()
                    #expect(try await Self.ids(queue, 6) == [1, 2, 3, 4, 5, 6])
                    try await queue.release([3, 5])
                    #expect(try await payloads.next()?.payload == "3")
                    try await TestDatabase.withConnection(url) { connection in
                        try await connection.query(
                            "UPDATE push_queue SET claimed_until = now() - interval '1 second' WHERE message_id IN (4, 6)",
                            logger: TestDatabase.logger
                        )
                    }
                    #expect(try await queue.reclaimExpired() == 2)
                    #expect(try await payloads.next()?.payload == "4")
                    #expect(try await queue.reclaimExpired() == 0, "nothing returned: no NOTIFY")
                    try await queue.release([1])
                    #expect(try await payloads.next()?.payload == "1")
                }
            }
        }
    }

    @Test func whileListeningARowBehindTheCursorWithoutANotifyWaitsForTheSafetyNet() async throws {
        try await Self.withQueue(rows: 16) { queue, url in
            queue.cursors.setListening(true)
            #expect(try await queue.probeBehindCursors() == 0, "no claim yet: no cursor past the start")
            #expect(try await Self.ids(queue, 4) == [1, 2, 3, 4])
            #expect(try await queue.probeBehindCursors() == 0, "rows behind the cursor, all claimed")
            try await Self.free(2, url: url)
            try await Task.sleep(for: .milliseconds(1100))
            #expect(try await Self.ids(queue, 4) == [5, 6, 7, 8], "the rescan interval alone no longer sends it to the start")
            #expect(try await queue.probeBehindCursors() == 1, "the probe finds message 2 behind the cursor")
            #expect(try await Self.ids(queue, 4) == [2, 9, 10, 11], "and the next claim starts there")
            try await Self.free(3, url: url)
            queue.cursors.setListening(false)
            #expect(try await Self.ids(queue, 4) == [3, 12, 13, 14], "without a listener the claims go to the start themselves")
        }
    }

    /// Chat's claims come back short: while listening, each starts past the rows the last one claimed (those in flight
    /// are not walked again); a row made claimable behind it is found when its NOTIFY rewinds the cursor.
    @Test func whileListeningAShortClaimStartsTheNextPastWhatItClaimed() async throws {
        try await Self.withQueue(rows: 3, rescan: .seconds(60)) { queue, url in
            queue.cursors.setListening(true)
            #expect(try await Self.ids(queue, 10) == [1, 2, 3])
            try await Self.free(2, url: url)
            try await TestDatabase.withConnection(url) { connection in
                try await connection.query(
                    "INSERT INTO push_queue (device_token, payload) SELECT repeat('b', 64), '{}' FROM generate_series(1, 2)",
                    logger: TestDatabase.logger
                )
            }
            #expect(try await Self.ids(queue, 10) == [4, 5], "from past message 3: message 2, freed without a NOTIFY, is not walked to")
            #expect(try await Self.ids(queue, 10) == [])
            queue.cursors.rewind(below: 2)
            #expect(try await Self.ids(queue, 10) == [2], "its NOTIFY (the lowest id) rewinds the cursor to it")
            queue.cursors.setListening(false)
            try await Self.free(1, url: url)
            #expect(try await Self.ids(queue, 10) == [], "past message 2 still: the claim that ended short started while listening")
            #expect(try await Self.ids(queue, 10) == [1], "without a listener, a short claim sends the next to the start")
        }
    }

    @Test func expiredLeasesReturnedToTheQueueAreClaimedNext() async throws {
        try await Self.withQueue(rows: 10, rescan: .seconds(60)) { queue, url in
            #expect(try await Self.ids(queue, 4) == [1, 2, 3, 4])
            try await TestDatabase.withConnection(url) { connection in
                try await connection.query(
                    "UPDATE push_queue SET claimed_until = now() - interval '1 second' WHERE message_id = 1",
                    logger: TestDatabase.logger
                )
            }
            #expect(try await queue.reclaimExpired() == 1)
            #expect(try await Self.ids(queue, 4) == [1, 5, 6, 7])
        }
    }

    /// A batch of results is recorded whole or not at all: while its transaction waits for a lock (a psql session
    /// holding `invalid_tokens`), none of it shows; when its connection is killed there, none of it was recorded;
    /// recorded again, all of it is.
    @Test func resultsAreRecordedWholeOrNotAtAll() async throws {
        try await Self.withQueue(rows: 4) { queue, url in
            #expect(try await Self.ids(queue, 4) == [1, 2, 3, 4])
            var results = PushQueue.Results()
            results.sent = [1, 2]
            results.failed = [PushQueue.Failure(messageID: 3, status: "410", reason: "Unregistered")]
            results.invalidTokens = [PushQueue.InvalidToken(token: String(repeating: "a", count: 64), reportedAt: nil, source: "test")]
            results.released = [4]
            try await TestDatabase.withConnection(url) { locker in
                try await locker.query("BEGIN", logger: TestDatabase.logger)
                try await locker.query("LOCK TABLE invalid_tokens IN EXCLUSIVE MODE", logger: TestDatabase.logger)
                let batch = results
                let recording = Task { try await queue.record(batch) }
                let waiting: PostgresQuery =
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"
                let start = ContinuousClock.now
                while try await TestDatabase.scalar(url, waiting, as: Int64.self) == 0, start.duration(to: .now) < .seconds(10) {
                    try await Task.sleep(for: .milliseconds(20))
                }
                #expect(
                    try await TestDatabase.scalar(url, "SELECT count(*) FROM push_deliveries WHERE time_sent IS NOT NULL", as: Int64.self)
                        == 0
                )
                let killed = try await TestDatabase.scalar(
                    url,
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()",
                    as: Int64.self
                )
                #expect(killed == 1)
                await #expect(throws: (any Error).self) { try await recording.value }
                try await locker.query("ROLLBACK", logger: TestDatabase.logger)
            }
            let untouched: PostgresQuery = """
                SELECT count(*) FROM push_deliveries WHERE time_sent IS NULL AND time_failed IS NULL AND claimed_until IS NOT NULL
                """
            #expect(try await TestDatabase.scalar(url, untouched, as: Int64.self) == 4, "nothing of the batch was recorded")
            #expect(try await TestDatabase.scalar(url, "SELECT count(*) FROM invalid_tokens", as: Int64.self) == 0)
            #expect(try await queue.record(results) == 0)
            let states = try await TestDatabase.scalar(
                url,
                """
                SELECT string_agg(concat_ws(':', message_id, time_sent IS NOT NULL, time_failed IS NOT NULL, claimed_until IS NULL),
                                  ',' ORDER BY message_id) FROM push_deliveries
                """,
                as: String.self
            )
            #expect(states == "1:t:f:f,2:t:f:f,3:f:t:t,4:f:f:t")
            #expect(try await TestDatabase.scalar(url, "SELECT count(*) FROM invalid_tokens", as: Int64.self) == 1)
        }
    }

    /// Daemons claiming at once share a backlog: every row is claimed once, by exactly one of them.
    @Test func concurrentClaimsNeverTakeARowTwice() async throws {
        try await Self.withQueue(rows: 3000) { first, url in
            let queues =
                [first]
                + (2...4).map {
                    PushQueue(
                        source: first.source,
                        instance: "test:\($0)",
                        lease: .seconds(30),
                        rescan: .seconds(1),
                        logger: TestDatabase.logger
                    )
                }
            var claimed = try await withThrowingTaskGroup(of: [Int64].self) { group in
                for queue in queues {
                    group.addTask {
                        var mine: [Int64] = []
                        while case let batch = try await Self.ids(queue, 50), !batch.isEmpty { mine += batch }
                        return mine
                    }
                }
                return try await group.reduce(into: []) { $0 += $1 }
            }
            claimed += try await Self.ids(first, 3000)
            #expect(claimed.count == 3000)
            #expect(Set(claimed) == Set(1...3000))
            let notClaimedOnce: Int64 = try await TestDatabase.scalar(
                url,
                "SELECT count(*) FROM push_deliveries WHERE attempts <> 1 OR claimed_until IS NULL"
            )
            #expect(notClaimedOnce == 0)
        }
    }

    /// A row that commits while a claim runs, after the claim began but before its scan reached the row, is either
    /// claimed by it or left unlocked, never locked and left behind: a claim under way locks what its scan finds, and
    /// the other claims meanwhile pass the locked row over (`SKIP LOCKED`) and move their cursors past it. Here the
    /// scan waits for an advisory lock the test holds (injected into `push_queue_candidates`) while the late row
    /// commits: the scan then finds it (each statement of a VOLATILE function reads a fresh snapshot), and the claim
    /// must return it. Before 033_claim_one_snapshot.sql the update read the statement's older snapshot, did not see the
    /// row, and returned without it while holding its lock (in the field bench a chat message waited for the minute's
    /// safety net).
    @Test(.timeLimit(.minutes(1))) func aRowThatCommitsWhileAClaimScansIsClaimedByTheClaimThatLockedIt() async throws {
        try await Self.withQueue(rows: 0) { queue, url in
            try await TestDatabase.withConnection(url) { gate in
                let log = TestDatabase.logger
                // The scan waits for the gate before reading (the definition as the migrations left it, plus the wait).
                var definition = ""
                for try await text in try await gate.query(
                    "SELECT pg_get_functiondef('push_queue_candidates'::regproc)",
                    logger: log
                ).decode(String.self) { definition = text }
                let gated = definition.replacingOccurrences(
                    of: "BEGIN\n",
                    with: "BEGIN\n    PERFORM pg_advisory_xact_lock_shared(4242);\n"
                )
                #expect(gated != definition)
                try await gate.query(PostgresQuery(unsafeSQL: gated), logger: log)
                try await gate.query("SELECT pg_advisory_lock(4242)", logger: log)
                try await TestDatabase.withConnection(url) { late in
                    try await late.query("BEGIN", logger: log)
                    try await late.query("INSERT INTO push_queue (device_token, payload) VALUES ('late', '{}')", logger: log)
                    async let claimed = Self.ids(queue, 10)
                    // The claim's statement has begun (its snapshot taken) and its scan waits at the gate.
                    var waiting = 0
                    while waiting == 0 {
                        for try await count in try await gate.query(
                            "SELECT count(*)::int FROM pg_locks WHERE locktype = 'advisory' AND NOT granted",
                            logger: log
                        ).decode(Int.self) { waiting = count }
                        if waiting == 0 { try await Task.sleep(for: .milliseconds(10)) }
                    }
                    try await late.query("COMMIT", logger: log)
                    try await gate.query("SELECT pg_advisory_unlock(4242)", logger: log)
                    #expect(try await claimed == [1], "the claim that locked the late row claims it")
                }
            }
            #expect(try await Self.ids(queue, 10) == [], "and nothing is left behind")
        }
    }

    /// A row another session holds locked (a claim in progress, a psql `SELECT … FOR UPDATE`) is passed over, not
    /// waited for, and claimed once the lock is gone.
    @Test(.timeLimit(.minutes(1))) func aLockedRowIsSkippedNotWaitedFor() async throws {
        try await Self.withQueue(rows: 5, rescan: .seconds(60)) { queue, url in
            try await TestDatabase.withConnection(url) { connection in
                try await connection.query("BEGIN", logger: TestDatabase.logger)
                try await connection.query("SELECT 1 FROM push_queue WHERE message_id = 2 FOR UPDATE", logger: TestDatabase.logger)
                #expect(try await Self.ids(queue, 10) == [1, 3, 4, 5])
                try await connection.query("COMMIT", logger: TestDatabase.logger)
            }
            #expect(try await Self.ids(queue, 10) == [2])
        }
    }
}

extension ClaimTests {
    /// A growing deferral (FCM's 429 or 503 without Retry-After) doubles with each attempt the row has had, up to a
    /// minute; a fixed one (Retry-After, APNs) waits what it says.
    @Test func growingDeferralsBackOffExponentially() async throws {
        try await Self.withQueue(rows: 4) { queue, url in
            let claimed = try await queue.claim(limit: 4).map(\.messageID)
            #expect(claimed.count == 4)
            try await TestDatabase.withConnection(url) { connection in
                try await connection.query(
                    "UPDATE push_queue SET attempts = CASE message_id % 4 WHEN 1 THEN 1 WHEN 2 THEN 3 WHEN 3 THEN 9 ELSE 2 END",
                    logger: TestDatabase.logger
                )
            }
            var results = PushQueue.Results()
            results.deferred = claimed.map { id in
                PushQueue.Deferral(
                    messageID: id,
                    delay: .seconds(id % 4 == 0 ? 7 : 1),
                    status: "503",
                    reason: "UNAVAILABLE",
                    growing: id % 4 != 0
                )
            }
            #expect(try await queue.record(results) == 0)
            let waits = try await TestDatabase.scalar(
                url,
                """
                SELECT string_agg(round(extract(epoch FROM claimed_until - now()))::text, ',' ORDER BY message_id % 4)
                FROM push_deliveries
                """,
                as: String.self
            )
            #expect(waits == "7,1,4,60", "fixed 7 s; 1 s after one attempt, 4 s after three, a minute at most (256 s after nine)")
        }
    }
}
