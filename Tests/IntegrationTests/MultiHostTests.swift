import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOConcurrencyHelpers
import PostgresNIO
import Testing

@testable import API
@testable import APNs
@testable import Push
@testable import Settings
@testable import Simulator
@testable import Storage
@testable import Support

/// libpq's multi-host URLs against two real clusters of the test's own: A answers read-only (its database has
/// `default_transaction_read_only`, what libpq's `read-write` check sees on a standby), B is writable. The session goes
/// to the first host that is what `target_session_attrs` asks; when that host goes and another becomes what the URL
/// asks (a standby promoted), the API follows by itself.
@Suite struct MultiHostTests {
    static func readOnly(_ cluster: ScratchCluster, _ on: Bool) async throws {
        try await TestDatabase.admin(try cluster.url(), "ALTER DATABASE pushchat SET default_transaction_read_only = \(on ? "on" : "off")")
    }

    static func url(_ hosts: [Int], _ query: String) throws -> DatabaseURL {
        try DatabaseURL(parsing: "postgres://postgres@" + hosts.map { "127.0.0.1:\($0)" }.joined(separator: ",") + "/pushchat?" + query)
    }

    /// The port of the server a connection to `url` reaches.
    static func port(_ url: DatabaseURL) async throws -> Int {
        try await Database.withConnection(url: url, applicationName: "multi-host-test", logger: TestDatabase.logger) { connection in
            for try await port in try await connection.query("SELECT inet_server_port()", logger: TestDatabase.logger).decode(Int32.self) {
                return Int(port)
            }
            return 0
        }
    }

    @Test func aSessionGoesToTheFirstHostThatIsWhatTheURLAsks() async throws {
        try await ScratchCluster.with { a in
            try await ScratchCluster.with { b in
                try await Self.readOnly(a, true)
                #expect(try await Self.port(Self.url([a.port, b.port], "target_session_attrs=read-write")) == b.port)
                #expect(try await Self.port(Self.url([a.port, b.port], "target_session_attrs=read-only")) == a.port)
                #expect(try await Self.port(Self.url([a.port, b.port], "target_session_attrs=any")) == a.port)
                #expect(try await Self.port(Self.url([b.port, a.port], "target_session_attrs=read-only")) == a.port)
                // Neither is in recovery: both are primaries, the first wins; no standby, so prefer-standby takes any.
                #expect(try await Self.port(Self.url([a.port, b.port], "target_session_attrs=primary")) == a.port)
                #expect(try await Self.port(Self.url([b.port, a.port], "target_session_attrs=prefer-standby")) == b.port)
                // A host that does not answer is passed over.
                let dead = try FreePort.loopback()
                #expect(try await Self.port(Self.url([dead, b.port], "connect_timeout=2")) == b.port)
                // None fits: one error naming what each host was.
                let error = await #expect(throws: DatabaseError.self) {
                    try await Self.port(Self.url([dead, a.port], "target_session_attrs=read-write"))
                }
                #expect(error?.code == .unavailable)
                #expect(error?.reason.contains("127.0.0.1:\(a.port): not read-write") == true, "\(String(describing: error))")
                #expect(error?.reason.contains("127.0.0.1:\(dead):") == true, "\(String(describing: error))")
            }
        }
    }

    /// The writable host is lost and the other becomes writable (a promotion): the API answers 503 meanwhile and 200
    /// again within 10 s of the promotion, with no restart, writing to the new host.
    @Test func theAPIFollowsAPromotion() async throws {
        try await ScratchCluster.with { a in
            try await ScratchCluster.with { b in
                try await Self.readOnly(a, true)
                let url = try Self.url([a.port, b.port], "target_session_attrs=read-write&connect_timeout=2")
                let configuration = APIHarness.configuration(url: url, mode: .production)
                try await APIHarness.run(configuration: configuration) { api in
                    #expect(try await DatabaseOutageTests.join(api, 1).status == .ok)
                    try b.stop()
                    #expect(try await DatabaseOutageTests.join(api, 2).status == .serviceUnavailable, "A is not writable yet")
                    try await Self.readOnly(a, false)
                    let promoted = ContinuousClock.now
                    var status = HTTPResponse.Status.serviceUnavailable
                    while status != .ok && promoted.duration(to: .now) < .seconds(15) {
                        status = try await DatabaseOutageTests.join(api, 3).status
                        if status != .ok { try await Task.sleep(for: .milliseconds(200)) }
                    }
                    let elapsed = promoted.duration(to: .now)
                    #expect(status == .ok && elapsed < .seconds(10), "200 again \(elapsed) after the promotion")
                    #expect(try await api.get("/readyz").status == .ok)
                }
                let rows = try await TestDatabase.scalar(
                    try a.url(database: "pushchat"),
                    "SELECT count(*) FROM active_users WHERE udid = \(Device.udid(3))",
                    as: Int64.self
                )
                #expect(rows == 1, "the join after the promotion is on A")
            }
        }
    }

    /// A host that takes the connection and never answers (a hung machine whose kernel still accepts it: SIGSTOP to
    /// PostgreSQL) is passed over after `connect_timeout`, as libpq does (its limit is for the whole connection, TLS and
    /// authentication included, not only TCP's): by a new connection, and by the API whose host hangs while another
    /// becomes writable. Before, the connection's start-up waited for ever and the API never moved.
    @Test func aHostThatAcceptsAndNeverAnswersIsPassedOverAfterConnectTimeout() async throws {
        try await ScratchCluster.with { a in
            try await ScratchCluster.with { b in
                try await Self.readOnly(b, true)
                let url = try Self.url([a.port, b.port], "target_session_attrs=read-write&connect_timeout=2")
                var configuration = APIHarness.configuration(url: url, mode: .production)
                configuration.databaseURL.statementTimeout = .seconds(1)
                try await APIHarness.run(configuration: configuration) { api in
                    #expect(try await DatabaseOutageTests.join(api, 1).status == .ok)
                    try a.freeze()
                    defer { try? a.resume() }
                    try await Self.readOnly(b, false)
                    let start = ContinuousClock.now
                    let port = try await withDeadline(.seconds(20)) { try await Self.port(url) }
                    let took = start.duration(to: .now)
                    #expect(port == b.port)
                    #expect(took < .seconds(6), "the hung host was given up after connect_timeout (2 s): \(took)")
                    let switched = ContinuousClock.now
                    var status = HTTPResponse.Status.serviceUnavailable
                    while status != .ok && switched.duration(to: .now) < .seconds(40) {
                        // A join that reached the hung host ends after statement_timeout + 5 s (outcome unknown).
                        status = (try? await withDeadline(.seconds(15)) { try await DatabaseOutageTests.join(api, 2).status }) ?? status
                        if status != .ok { try await Task.sleep(for: .milliseconds(200)) }
                    }
                    let elapsed = switched.duration(to: .now)
                    #expect(status == .ok && elapsed < .seconds(20), "200 again \(elapsed) after the host hung")
                }
                let rows = try await TestDatabase.scalar(
                    try b.url(database: "pushchat"),
                    "SELECT count(*) FROM active_users WHERE udid = \(Device.udid(2))",
                    as: Int64.self
                )
                #expect(rows == 1, "the join after the switch is on B")
            }
        }
    }

    /// The host in use becomes read-only under the API (its sessions end and come back read-only, as a demoted
    /// primary's would) while the other becomes writable: a write refused as read-only is a 503 (nothing was written),
    /// never a 500, and the API moves to the writable host within 10 s.
    @Test func aHostThatBecomesReadOnlyIsLeftForTheWritableOne() async throws {
        try await ScratchCluster.with { a in
            try await ScratchCluster.with { b in
                try await Self.readOnly(b, true)
                let url = try Self.url([a.port, b.port], "target_session_attrs=read-write&connect_timeout=2")
                try await APIHarness.run(configuration: APIHarness.configuration(url: url, mode: .production)) { api in
                    #expect(try await DatabaseOutageTests.join(api, 1).status == .ok)
                    try await Self.readOnly(a, true)
                    try await Self.readOnly(b, false)
                    try await TestDatabase.admin(
                        try a.url(),
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = 'pushchat' AND pid <> pg_backend_pid()"
                    )
                    let switched = ContinuousClock.now
                    var statuses: [HTTPResponse.Status] = []
                    while statuses.last != .ok && switched.duration(to: .now) < .seconds(15) {
                        statuses.append(try await DatabaseOutageTests.join(api, 2 + statuses.count).status)
                        if statuses.last != .ok { try await Task.sleep(for: .milliseconds(100)) }
                    }
                    #expect(statuses.last == .ok && switched.duration(to: .now) < .seconds(10), "\(statuses.map(\.code))")
                    #expect(statuses.allSatisfy { $0 == .ok || $0 == .serviceUnavailable }, "never a 500: \(statuses.map(\.code))")
                }
                let onB = try await TestDatabase.scalar(
                    try b.url(database: "pushchat"),
                    "SELECT count(*) FROM active_users",
                    as: Int64.self
                )
                #expect(onB == 1, "the join after the switch is on B")
            }
        }
    }

    /// A primary and its standby (`pg_basebackup -R`): the primary crashes (`-m immediate`) while joins come every
    /// 20 ms, the standby is promoted, and the API follows by itself. Synchronous (`synchronous_standby_names`), every
    /// join it answered 200 is on the promoted standby; asynchronous, what was lost is reported, not asserted (the
    /// acknowledged rows in WAL not yet streamed at the crash).
    @Test(arguments: [true, false])
    func aPromotedStandbyAndTheAcknowledgedJoins(synchronous: Bool) async throws {
        try await ScratchCluster.with { primary in
            let standby = try primary.standby()
            defer { standby.remove() }
            try await Self.replicate(primary, synchronous: synchronous)
            let url = try Self.url([primary.port, standby.port], "target_session_attrs=read-write&connect_timeout=2")
            try await APIHarness.run(configuration: APIHarness.configuration(url: url, mode: .production)) { api in
                let acknowledged = NIOLockedValueBox<[Int]>([])
                let promotedAt = NIOLockedValueBox<ContinuousClock.Instant?>(nil)
                let backAt = NIOLockedValueBox<ContinuousClock.Instant?>(nil)
                let joins = Task {
                    var n = 1
                    while !Task.isCancelled {
                        if (try? await DatabaseOutageTests.join(api, n).status) == .ok {
                            acknowledged.withLockedValue { $0.append(n) }
                            if promotedAt.withLockedValue({ $0 }) != nil { backAt.withLockedValue { $0 = $0 ?? .now } }
                        }
                        n += 1
                        try? await Task.sleep(for: .milliseconds(20))
                    }
                }
                // Joins answered before the crash and after the promotion, by count (not by time: a busy machine
                // answers fewer in a second).
                let answered: @Sendable () -> Int = { acknowledged.withLockedValue { $0.count } }
                var deadline = ContinuousClock.now + .seconds(15)
                while answered() < 20 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
                try primary.crash()
                try await Task.sleep(for: .milliseconds(500))
                try standby.promote()
                promotedAt.withLockedValue { $0 = .now }
                deadline = ContinuousClock.now + .seconds(15)
                while backAt.withLockedValue({ $0 }) == nil && ContinuousClock.now < deadline {
                    try await Task.sleep(for: .milliseconds(100))
                }
                let atBack = answered()
                deadline = ContinuousClock.now + .seconds(10)
                while answered() < atBack + 10 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
                joins.cancel()
                _ = await joins.value
                let promoted = try #require(promotedAt.withLockedValue { $0 })
                let back = try #require(backAt.withLockedValue { $0 }, "the API never answered 200 after the promotion")
                #expect(promoted.duration(to: back) < .seconds(10), "200 again \(promoted.duration(to: back)) after the promotion")
                print("failover: the API answered 200 again \(promoted.duration(to: back)) after the standby's promotion")
                let udids = acknowledged.withLockedValue { $0 }.map { Device.udid($0) }
                let kept = try await TestDatabase.scalar(
                    try standby.url(database: "pushchat"),
                    "SELECT count(*) FROM active_users WHERE udid = ANY(\(udids))",
                    as: Int64.self
                )
                #expect(udids.count >= 30, "20 joins answered before the crash and 10 after the promotion: \(udids.count)")
                print(
                    "failover, \(synchronous ? "synchronous" : "asynchronous") standby: \(Int64(udids.count) - kept) of \(udids.count) acknowledged joins lost"
                )
                if synchronous {
                    #expect(kept == Int64(udids.count), "every acknowledged join is on the promoted standby: \(kept) of \(udids.count)")
                }
            }
        }
    }

    /// The push daemon on the same URL: the primary crashes mid-drain of a 20,000-row backlog, the synchronous standby
    /// is promoted, and the daemon follows by itself (no restart). Every row arrives at the simulator and none is left
    /// waiting; a row arrives twice only if the daemon held it at the crash.
    @Test func theDaemonFollowsAPromotionAndEveryRowArrives() async throws {
        try await ScratchCluster.with { primary in
            let standby = try primary.standby()
            defer { standby.remove() }
            try await Self.replicate(primary, synchronous: true)
            let rows = 20_000
            try await TestDatabase.withConnection(try primary.url(database: "pushchat")) { connection in
                try await connection.query(
                    """
                    INSERT INTO push_queue (device_token, payload)
                    SELECT lpad(to_hex(g), 64, '0'), '{"aps":{"alert":"x"}}' FROM generate_series(1, \(rows)) g
                    """,
                    logger: TestDatabase.logger
                )
            }
            try await PushHarness.run { harness in
                let url = try Self.url([primary.port, standby.port], "target_session_attrs=read-write&connect_timeout=2")
                let configuration = harness.configuration(url: url)
                try await harness.withDaemons([configuration]) {
                    let started = ContinuousClock.now
                    while harness.simulator.state.counters.accepted < rows / 5 && started.duration(to: .now) < .seconds(60) {
                        try await Task.sleep(for: .milliseconds(5))
                    }
                    try primary.crash()
                    let crashedAt = harness.simulator.state.counters.accepted
                    try await Task.sleep(for: .milliseconds(500))
                    try standby.promote()
                    let promoted = ContinuousClock.now
                    while Set(harness.simulator.state.accepted.map(\.token)).count < rows && promoted.duration(to: .now) < .seconds(60) {
                        try await Task.sleep(for: .milliseconds(100))
                    }
                    let accepted = harness.simulator.state.accepted.map(\.token)
                    let twice = accepted.count - Set(accepted).count
                    print(
                        "failover mid-drain: \(crashedAt) of \(rows) rows sent at the crash; all \(Set(accepted).count) arrived \(promoted.duration(to: .now)) after the promotion; \(twice) twice"
                    )
                    #expect(Set(accepted).count == rows, "every row arrives")
                    #expect(crashedAt < rows, "the crash came mid-drain")
                    #expect(twice <= rows - crashedAt, "only rows not yet sent at the crash can arrive twice")
                }
            }
            let waiting = try await TestDatabase.scalar(
                try standby.url(database: "pushchat"),
                "SELECT count(*) FROM push_queue WHERE time_sent IS NULL AND time_failed IS NULL",
                as: Int64.self
            )
            #expect(waiting == 0, "nothing left waiting on the promoted standby")
        }
    }

    /// PgBouncer on each database machine and both poolers in the URL (the guide's §17): the read-write check goes
    /// through each pooler to the server behind it, so the API passes over the standby's pooler, and when the primary
    /// crashes and the standby is promoted it moves to the other pooler by itself, 200 again within 10 s, and every
    /// join it answered 200 is on the promoted standby.
    @Test func theAPIFollowsAPromotionThroughAPoolerOnEachDatabase() async throws {
        try await ScratchCluster.with { primary in
            let standby = try primary.standby()
            defer { standby.remove() }
            try await Self.replicate(primary, synchronous: true)
            try await PgBouncer.with(front: primary) { first in
                try await PgBouncer.with(front: standby) { second in
                    let url = try Self.url([second.port, first.port], "target_session_attrs=read-write&connect_timeout=2")
                    #expect(try await Self.port(url) == primary.port, "the standby's pooler, named first, is passed over")
                    try await APIHarness.run(configuration: APIHarness.configuration(url: url, mode: .production)) { api in
                        #expect(try await DatabaseOutageTests.join(api, 1).status == .ok)
                        try primary.crash()
                        try await Task.sleep(for: .milliseconds(500))
                        try standby.promote()
                        let promoted = ContinuousClock.now
                        var acknowledged: [Int] = [1]
                        var back: Duration?
                        for n in 2...1000 where promoted.duration(to: .now) < .seconds(15) {
                            if (try? await DatabaseOutageTests.join(api, n).status) == .ok {
                                acknowledged.append(n)
                                back = back ?? promoted.duration(to: .now)
                                if acknowledged.count >= 5 { break }
                            }
                            try await Task.sleep(for: .milliseconds(50))
                        }
                        let switched = try #require(back, "the API never answered 200 after the promotion")
                        print("failover through PgBouncer: the API answered 200 again \(switched) after the standby's promotion")
                        #expect(switched < .seconds(10))
                        #expect(try await Self.port(url) == standby.port, "the URL now reaches the promoted standby")
                        let kept = try await TestDatabase.scalar(
                            try standby.url(database: "pushchat"),
                            "SELECT count(*) FROM active_users WHERE udid = ANY(\(acknowledged.map { Device.udid($0) }))",
                            as: Int64.self
                        )
                        #expect(kept == Int64(acknowledged.count), "every acknowledged join is on the promoted standby")
                    }
                }
            }
        }
    }

    /// The whole service on one multi-host URL, as the issue's failover drill: the API and the push daemon (no
    /// restart), chat (a message every 50 ms from one member of a room to the other) on top of a 20,000-row backlog;
    /// the primary crashes (`-m immediate`) mid-drain and the synchronous standby is promoted. Every message answered
    /// 200 arrives at the simulator, the backlog drains, a row arrives twice only if it was not yet sent at the crash,
    /// the API answers 200 within 10 s of the promotion, and the feedback job runs against the same URL afterwards.
    @Test func theServiceFollowsAPromotionUnderChatAndABacklog() async throws {
        try await ScratchCluster.with { primary in
            let standby = try primary.standby()
            defer { standby.remove() }
            try await Self.replicate(primary, synchronous: true)
            let rows = 20_000
            let backlogTokens = Set((1...rows).map { String(format: "%064x", 1_000_000 + $0) })
            try await TestDatabase.withConnection(try primary.url(database: "pushchat")) { connection in
                try await connection.query(
                    """
                    INSERT INTO push_queue (device_token, payload)
                    SELECT lpad(to_hex(1000000 + g), 64, '0'), '{"aps":{"alert":"x"}}' FROM generate_series(1, \(rows)) g
                    """,
                    logger: TestDatabase.logger
                )
            }
            let url = try Self.url([primary.port, standby.port], "target_session_attrs=read-write&connect_timeout=2")
            try await PushHarness.run { harness in
                try await APIHarness.run(configuration: APIHarness.configuration(url: url, mode: .production)) { api in
                    for n in 1...3 { #expect(try await DatabaseOutageTests.join(api, n).status == .ok) }
                    try await harness.withDaemons([harness.configuration(url: url)]) {
                        let acknowledged = NIOLockedValueBox<[Int]>([])
                        let crashedAt = NIOLockedValueBox<ContinuousClock.Instant?>(nil)
                        let promotedAt = NIOLockedValueBox<ContinuousClock.Instant?>(nil)
                        let backAt = NIOLockedValueBox<ContinuousClock.Instant?>(nil)
                        let chat = Task {
                            var n = 1
                            while !Task.isCancelled {
                                let status = try? await api.post(["cmd": "message", "udid": Device.udid(1), "text": "chat-\(n)."]).status
                                if status == .ok {
                                    acknowledged.withLockedValue { $0.append(n) }
                                    if promotedAt.withLockedValue({ $0 }) != nil { backAt.withLockedValue { $0 = $0 ?? .now } }
                                }
                                n += 1
                                try? await Task.sleep(for: .milliseconds(50))
                            }
                        }
                        // Chat answered before the crash and after the promotion, by count (a busy machine answers
                        // fewer in a given time).
                        let answered: @Sendable () -> Int = { acknowledged.withLockedValue { $0.count } }
                        let started = ContinuousClock.now
                        while (harness.simulator.state.counters.accepted < rows / 5 || answered() < 10)
                            && started.duration(to: .now) < .seconds(60)
                        {
                            try await Task.sleep(for: .milliseconds(5))
                        }
                        let sentBefore = harness.simulator.state.counters.accepted
                        let drainBefore = Double(sentBefore) / started.duration(to: .now).seconds
                        try primary.crash()
                        crashedAt.withLockedValue { $0 = .now }
                        try await Task.sleep(for: .milliseconds(500))
                        try standby.promote()
                        let promoted = ContinuousClock.now
                        let sentAtPromotion = harness.simulator.state.counters.accepted
                        promotedAt.withLockedValue { $0 = promoted }
                        while backAt.withLockedValue({ $0 }) == nil && promoted.duration(to: .now) < .seconds(15) {
                            try await Task.sleep(for: .milliseconds(50))
                        }
                        let atBack = answered()
                        let after = ContinuousClock.now
                        while answered() < atBack + 10 && after.duration(to: .now) < .seconds(15) {
                            try await Task.sleep(for: .milliseconds(50))
                        }
                        chat.cancel()
                        _ = await chat.value
                        let messages = acknowledged.withLockedValue { $0 }
                        let arrived = {
                            let accepted = harness.simulator.state.accepted
                            let backlog = Set(accepted.map(\.token)).intersection(backlogTokens)
                            let payloads = accepted.filter { $0.token == Device.token(2) }.map(\.payload)
                            return (accepted, backlog, payloads)
                        }
                        while promoted.duration(to: .now) < .seconds(60) {
                            let (_, backlog, payloads) = arrived()
                            if backlog.count >= rows && payloads.count >= messages.count { break }
                            try await Task.sleep(for: .milliseconds(100))
                        }
                        let drained = promoted.duration(to: .now)
                        let (accepted, backlog, payloads) = arrived()
                        let missing = messages.filter { n in !payloads.contains { $0.contains("chat-\(n).") } }
                        let twice = accepted.count - Set(accepted.map { "\($0.token) \($0.payload)" }).count
                        let back = try #require(backAt.withLockedValue { $0 }, "the API never answered 200 after the promotion")
                        let crashed = try #require(crashedAt.withLockedValue { $0 })
                        print(
                            """
                            failover drill: \(sentBefore) of \(rows) backlog rows sent at the crash (\(Int(drainBefore)) rows/s before); \
                            API 200 again \(crashed.duration(to: back)) after the crash, \(promoted.duration(to: back)) after the promotion; \
                            \(messages.count) chat messages answered 200, \(missing.count) missing; backlog drained \(drained) after the \
                            promotion (\(Int(Double(accepted.count - sentAtPromotion) / max(drained.seconds, 0.001))) rows/s after); \(twice) twice
                            """
                        )
                        #expect(promoted.duration(to: back) < .seconds(10), "200 again \(promoted.duration(to: back)) after the promotion")
                        #expect(missing.isEmpty, "every message answered 200 arrives: missing \(missing.prefix(10))")
                        #expect(messages.count >= 20, "10 chat messages before the crash, 10 after the promotion: \(messages.count)")
                        #expect(backlog.count == rows, "the backlog drains: \(backlog.count) of \(rows)")
                        #expect(sentBefore < rows, "the crash came mid-drain")
                        #expect(twice <= rows - sentBefore, "only what was not yet sent at the crash can arrive twice")
                    }
                    // The feedback job, run as the deployment runs it, on the same URL after the switch.
                    harness.simulator.state.setFeedback([
                        FeedbackTuple(timestamp: UInt32(Date().timeIntervalSince1970), token: DeviceToken.bytes(hex: Device.token(3))!)
                    ])
                    var environment = harness.environment(harness.configuration(url: url))
                    environment["PUSHCHAT_APNS_FEEDBACK"] = "127.0.0.1:\(harness.ports.feedback)"
                    let job = try Executable(name: "pushchat-feedback").run(["development"], environment: environment)
                    #expect(job.status == 0, "\(job.standardError)")
                    #expect(job.standardOutput.contains("Feedback: 1 tuples read, 1 users deleted"), "\(job.standardOutput)")
                    let left = try await TestDatabase.scalar(
                        try standby.url(database: "pushchat"),
                        "SELECT count(*) FROM active_users WHERE udid = \(Device.udid(3))",
                        as: Int64.self
                    )
                    #expect(left == 0, "the feedback job deleted the expired device on the promoted standby")
                }
            }
        }
    }

    /// Makes `primary`'s database durable as Debian's default (`synchronous_commit = on`: the test clusters run with
    /// it off for speed) and, `synchronous`, commit only once its standby has the WAL (`synchronous_standby_names`);
    /// waits until the standby streams (synchronously when asked).
    static func replicate(_ primary: ScratchCluster, synchronous: Bool) async throws {
        if synchronous {
            try await TestDatabase.admin(try primary.url(), "ALTER SYSTEM SET synchronous_standby_names = '*'")
            try await TestDatabase.admin(try primary.url(), "SELECT pg_reload_conf()")
        }
        try await TestDatabase.admin(try primary.url(), "ALTER DATABASE pushchat SET synchronous_commit = on")
        let state = synchronous ? "sync" : "async"
        let streaming = ContinuousClock.now
        while try await TestDatabase.scalar(
            try primary.url(),
            "SELECT count(*) FROM pg_stat_replication WHERE sync_state = \(state)",
            as: Int64.self
        ) != 1 {
            guard streaming.duration(to: .now) < .seconds(20) else { throw CancellationError() }
            try await Task.sleep(for: .milliseconds(100))
        }
    }
}
