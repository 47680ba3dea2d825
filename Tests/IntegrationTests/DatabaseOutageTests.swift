import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import PostgresNIO
import Testing

@testable import API
@testable import APNs
@testable import Settings
@testable import Simulator
@testable import Storage
@testable import Support

/// PostgreSQL stopped (`pg_ctl stop -m fast`, as `systemctl restart postgresql` does) and started again under load,
/// on a cluster of the test's own: the API answers at once while it is away and serves again by itself, the push
/// daemon stops on SIGTERM whatever the database does and resumes its drain after a restart, losing nothing.
@Suite(.serialized) struct DatabaseOutageTests {
    static func join(_ api: APIHarness, _ n: Int) async throws -> (status: HTTPResponse.Status, retryAfter: String?, elapsed: Duration) {
        let start = ContinuousClock.now
        let response = try await api.post([
            "cmd": "join", "udid": Device.udid(n), "token": Device.token(n), "name": "U\(n)", "code": "room",
        ])
        return (response.status, response.headers[.retryAfter], start.duration(to: .now))
    }

    @Test func theAPIAnswersWithinTwoSecondsWhileTheDatabaseIsDownAndServesAgainWhenItIsBack() async throws {
        try await ScratchCluster.with { cluster in
            let configuration = APIHarness.configuration(url: try cluster.url(database: "pushchat"), mode: .production)
            try await APIHarness.run(configuration: configuration) { api in
                #expect(try await Self.join(api, 1).status == .ok)
                #expect(try await api.get("/readyz").status == .ok)
                try cluster.stop()
                // At once, before anyone could know, and again a little later: 30 requests at a time each time.
                for round in 1...2 {
                    let answers = try await withThrowingTaskGroup(
                        of: (status: HTTPResponse.Status, retryAfter: String?, elapsed: Duration).self
                    ) {
                        group in
                        for n in 0..<30 { group.addTask { try await Self.join(api, 100 * round + n) } }
                        return try await group.reduce(into: []) { $0.append($1) }
                    }
                    let slowest = answers.map(\.elapsed).max() ?? .zero
                    #expect(answers.allSatisfy { $0.status == .serviceUnavailable }, "round \(round): \(answers.map(\.status.code))")
                    #expect(answers.allSatisfy { $0.retryAfter == "2" })
                    #expect(slowest < .seconds(2), "round \(round): the slowest answer took \(slowest)")
                    try await Task.sleep(for: .seconds(1))
                }
                let ready = try await api.get("/readyz")
                #expect(ready.status == .serviceUnavailable)
                #expect(ready.text == "database unreachable\n")
                try cluster.start()
                // Served again by itself: no restart of the API.
                let back = ContinuousClock.now
                var status = HTTPResponse.Status.serviceUnavailable
                while status != .ok && back.duration(to: .now) < .seconds(20) {
                    status = try await Self.join(api, 2).status
                    if status != .ok { try await Task.sleep(for: .milliseconds(200)) }
                }
                #expect(status == .ok, "served again within 20 s of the restart")
                #expect(try await api.get("/readyz").status == .ok)
                // Only the two accepted joins are stored; none of the 60 refused ones.
                #expect(try await api.count("active_users") == 2)
            }
        }
    }

    /// A server that takes the statement and never answers (frozen): the request stops waiting after statement_timeout
    /// + 5 s with a 503 that says the request may have been carried out (in production mode too: the one 503 after which
    /// something may have happened), and does not hang; later requests are refused at once. Thawed, the join sent
    /// again leaves one row, whether the first was carried out or not.
    @Test func aDatabaseThatNeverAnswersEndsTheRequestAfterItsLimit() async throws {
        try await ScratchCluster.with { cluster in
            var configuration = APIHarness.configuration(url: try cluster.url(database: "pushchat"), mode: .production)
            configuration.databaseURL.statementTimeout = .seconds(1)
            try await APIHarness.run(configuration: configuration) { api in
                #expect(try await Self.join(api, 1).status == .ok)
                try cluster.freeze()
                defer { try? cluster.resume() }
                let start = ContinuousClock.now
                let response = try await api.post(["cmd": "join", "udid": Device.udid(2), "token": "0", "name": "B", "code": "room"])
                let elapsed = start.duration(to: .now)
                #expect(response.status == .serviceUnavailable)
                #expect(response.errorDescription == APIController.outcomeUnknown, "\(response.text)")
                #expect(response.headers[.retryAfter] == "2")
                #expect(elapsed >= .seconds(5) && elapsed < .seconds(10), "statement_timeout + 5 s, took \(elapsed)")
                let next = try await Self.join(api, 3)
                #expect(next.status == .serviceUnavailable)
                #expect(next.elapsed < .seconds(2), "the probe knows by now: refused at once")
                try cluster.resume()
                let back = ContinuousClock.now
                var status = HTTPResponse.Status.serviceUnavailable
                while status != .ok && back.duration(to: .now) < .seconds(20) {
                    status = try await Self.join(api, 4).status
                    if status != .ok { try await Task.sleep(for: .milliseconds(200)) }
                }
                #expect(status == .ok, "served again after the server thawed")
                // Carried out once the server thawed, or never (it depends on where the statement was): the same join
                // sent again then leaves one row either way.
                #expect(try await Self.join(api, 2).status == .ok)
                let joined = try await TestDatabase.scalar(
                    try cluster.url(database: "pushchat"),
                    "SELECT count(*) FROM active_users WHERE udid = \(Device.udid(2))",
                    as: Int64.self
                )
                #expect(joined == 1, "the join the 503 said may have been carried out, sent again: one row")
            }
        }
    }

    /// What a 503 whose outcome is unknown leaves behind once the database returns, for a chat message and for a
    /// provider notification: all of the request or none of it, never a part; the provider's answer says it may have
    /// been carried out, and the same request sent again with its Idempotency-Key ends with one notification either way
    /// (queued then and answered with, or queued now).
    @Test func whatA503WithAnUnknownOutcomeLeftIsFoundOnce() async throws {
        try await ScratchCluster.with { cluster in
            let url = try cluster.url(database: "pushchat")
            var configuration = APIHarness.configuration(url: url, mode: .production)
            configuration.databaseURL.statementTimeout = .seconds(1)
            let key = try await ProviderAPITests.createKey(url)
            try await APIHarness.run(configuration: configuration) { api in
                @Sendable func untilServed() async throws {
                    let back = ContinuousClock.now
                    while try await Self.join(api, 9).status != .ok {
                        #expect(back.duration(to: .now) < .seconds(20), "served again within 20 s of the thaw")
                        guard back.duration(to: .now) < .seconds(20) else { return }
                        try await Task.sleep(for: .milliseconds(200))
                    }
                }
                #expect(try await Self.join(api, 1).status == .ok)
                #expect(try await Self.join(api, 2).status == .ok)
                try cluster.freeze()
                defer { try? cluster.resume() }
                let message = try await api.post(["cmd": "message", "udid": Device.udid(1), "text": "are you there?"])
                #expect(message.status == .serviceUnavailable)
                #expect(message.errorDescription == APIController.outcomeUnknown, "\(message.text)")
                try cluster.resume()
                try await untilServed()
                // Carried out or not (a statement prepared on that connection reaches the frozen server whole; one
                // not yet prepared waits for its Parse to be answered and never runs): all of it or nothing.
                let (stored, queued) = (try await api.count("messages"), try await api.count("push_queue"))
                #expect(stored <= 1 && queued == stored, "the message and its row for the room's other member, or neither")

                let body = #"{"to": {"tokens": ["\#(ProviderAPITests.token(7))"]}, "aps": {"alert": "once"}}"#
                let headers: HTTPFields = [HTTPField.Name("Idempotency-Key")!: "order-7"]
                try cluster.freeze()
                let unknown = try await ProviderAPITests.call(api, .post, "/v1/notifications", key: key, body, headers: headers)
                #expect(unknown.status == 503)
                #expect((unknown.json["reason"] as? String)?.contains("may have been carried out") == true, "\(unknown.json)")
                #expect(unknown.headers[.retryAfter] == "2")
                try cluster.resume()
                try await untilServed()
                let again = try await ProviderAPITests.call(api, .post, "/v1/notifications", key: key, body, headers: headers)
                #expect(again.status == 202, "queued now, or answered with the notification queued then")
                #expect(try await api.count("notifications") == 1, "once, whichever it was")
                let rows = try await TestDatabase.scalar(
                    url,
                    "SELECT count(*) FROM push_queue WHERE device_token = \(ProviderAPITests.token(7))",
                    as: Int64.self
                )
                #expect(rows == 1, "one row for the device")
            }
        }
    }

    @Test func aTimedOutBroadcastWritesNothingAndItsRetryQueuesOnce() async throws {
        try await TestDatabase.withFreshDatabase { url in
            let devices = 400
            try await TestDatabase.withConnection(url) { connection in
                try await connection.query(
                    "INSERT INTO devices (device_token, registered_by) SELECT lpad(to_hex(g), 64, '0'), 'seed' FROM generate_series(1, \(devices)) g",
                    logger: TestDatabase.logger
                )
            }
            // The key may queue exactly the room's size in a minute: a retry is accepted only if the failed attempt
            // was refunded, and a second copy would be refused.
            let key = try await ProviderAPITests.createKey(url, recipients: devices)
            var configuration = APIHarness.configuration(url: url, mode: .production)
            configuration.databaseURL.statementTimeout = .seconds(2)
            configuration.databaseURL.lockTimeout = .zero
            // The old request deadline (1 s here) cut the wait short while the statement went on and committed.
            try await APIHarness.run(configuration: configuration, databaseTimeout: .seconds(1)) { api in
                @Sendable func broadcast() async throws -> (status: Int, recipients: Int?, retryAfter: String?) {
                    let answer = try await ProviderAPITests.call(
                        api,
                        .post,
                        "/v1/notifications",
                        key: key,
                        #"{"to": {"all": true}, "aps": {"alert": "hi"}}"#
                    )
                    return (answer.status, answer.json["recipients"] as? Int, answer.headers[.retryAfter])
                }
                // Held longer than statement_timeout: the server cancels the statement, nothing is queued.
                let refused = try await LockTimeoutTests.whileLocked(url, "LOCK TABLE push_queue IN EXCLUSIVE MODE") {
                    let answer = try await broadcast()
                    try await Task.sleep(for: .milliseconds(500))
                    return answer
                }
                #expect(refused.status == 503)
                #expect(refused.retryAfter == "2")
                #expect(try await api.count("push_queue") == 0, "a 503 means nothing was queued")
                #expect(try await api.count("notifications") == 0)
                // Held longer than the old 1 s deadline (which answered 503 while the statement went on to commit) and
                // shorter than statement_timeout: the request waits for the server's word.
                let pending = try await LockTimeoutTests.whileLocked(url, "LOCK TABLE push_queue IN EXCLUSIVE MODE") {
                    let answer = Task { try await broadcast() }
                    try await Task.sleep(for: .milliseconds(1500))
                    // Past the old deadline, the request's statement is still there, waiting for the lock.
                    let waiting = try await TestDatabase.scalar(
                        url,
                        "SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = 'push_queue'::regclass",
                        as: Int64.self
                    )
                    #expect(waiting == 1, "the request is blocked on the lock")
                    return answer
                }
                let accepted = try await pending.value
                #expect(accepted.status == 202)
                #expect(accepted.recipients == devices)
                let copies = try await TestDatabase.scalar(
                    url,
                    "SELECT count(*) FROM (SELECT device_token FROM push_deliveries GROUP BY device_token HAVING count(*) > 1) d",
                    as: Int64.self
                )
                #expect(try await api.count("push_queue") == Int64(devices))
                #expect(copies == 0, "every device gets it once")
                #expect(try await broadcast().status == 429, "the budget paid for one broadcast, not two")
            }
        }
    }

    @Test func thePushDaemonResumesAfterARestartOfPostgreSQLAndStopsOnSIGTERMWhileItIsDown() async throws {
        try await ScratchCluster.with { cluster in
            var simulatorConfiguration = SimulatorTests.configuration()
            simulatorConfiguration.faults.readDelay = .milliseconds(10)  // rows in flight when the database goes
            let simulator = try APNsSimulator(configuration: simulatorConfiguration, logger: TestDatabase.logger)
            try await simulator.withRunning { ports in
                let harness = PushHarness(url: try cluster.url(database: "pushchat"), simulator: simulator, ports: ports)
                let total = 3000
                let ids = try await harness.queue(total)
                let environment = harness.environment(harness.configuration())
                let (daemon, output) = try PushProcessTests.start(environment)
                try await harness.waitUntil(timeout: .seconds(20), "sending is under way") { simulator.state.counters.accepted >= 300 }
                try cluster.stop()
                try await Task.sleep(for: .seconds(2))
                #expect(daemon.isRunning, "the daemon waits for the database, it does not exit")
                try cluster.start()
                // Resumed by itself: every row reaches the gateway and is stamped.
                do {
                    try await harness.waitUntilAllSent(total, timeout: .seconds(60))
                } catch {
                    daemon.terminate()
                    _ = try await PushProcessTests.waitForExit(daemon, timeout: .seconds(15))
                    Issue.record("the daemon's log: \(String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self))")
                    throw error
                }
                #expect(Set(harness.acceptedCounts.keys) == Set(ids.map { UInt32($0) }), "nothing lost")
                let twice = harness.acceptedCounts.filter { $0.value > 1 }.keys.sorted()
                #expect(twice.isEmpty, "\(twice.count) rows reached the gateway twice: \(twice.prefix(3))…\(twice.suffix(3))")
                // Down again, then SIGTERM: gone within 15 s whatever the database does.
                try cluster.stop()
                try await Task.sleep(for: .seconds(1))
                let stopping = ContinuousClock.now
                daemon.terminate()
                let exited = try await PushProcessTests.waitForExit(daemon, timeout: .seconds(15))
                #expect(exited, "still running 15 s after SIGTERM")
                if !exited { kill(daemon.processIdentifier, SIGKILL) }
                let log = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
                if !twice.isEmpty { Issue.record("the daemon's log: \(log)") }
                #expect(log.contains("The database does not answer"), "the outage is logged")
                #expect(log.contains("The database answers again"), "and the return")
                print("daemon stopped \(stopping.duration(to: .now)) after SIGTERM with the database down")
                try cluster.start()
            }
        }
    }
}
