import Foundation
import NIOCore
import PostgresNIO
import Testing

@testable import Settings
@testable import Simulator
@testable import Storage
@testable import Support
@testable import Webhooks

/// Delivery events to the caller (issue 45), end to end: webhooks added with `pushchat-api webhooks`, results recorded
/// by the daemon, events POSTed to a receiver that checks the signatures with Python's hmac (`webhook_receiver.py`).
@Suite(.serialized) struct WebhookTests {
    static let allTypes = "notification.sent,notification.failed,device.unregistered,notification.completed"

    /// `pushchat-api webhooks ARGUMENTS development` as the schema's owner.
    static func cli(_ harness: PushHarness, _ arguments: [String], privateHosts: String = "") throws -> Executable.Result {
        try Executable(name: "pushchat-api").run(
            ["webhooks"] + arguments + ["development"],
            environment: ["PUSHCHAT_DATABASE_URL": harness.url.connectionString, "PUSHCHAT_WEBHOOK_PRIVATE_HOSTS": privateHosts]
        )
    }

    /// Adds a webhook; its secret (the last line printed).
    static func add(_ harness: PushHarness, _ name: String, port: Int, events: String = allTypes) throws -> String {
        let added = try cli(
            harness,
            ["add", name, "--url", "http://127.0.0.1:\(port)/hooks/pushchat?source=test", "--events", events],
            privateHosts: "127.0.0.1:\(port)"
        )
        #expect(added.status == 0, "\(added.standardError)")
        let secret = added.standardOutput.split(separator: "\n").last.map(String.init) ?? ""
        #expect(secret.hasPrefix("whsec_") && secret.count > 38, "\(added.standardOutput)")
        return secret
    }

    /// A notification (already expanded) to tokens `numbers`, and a chat row to `chat` beside it; its id.
    @discardableResult
    static func notify(_ harness: PushHarness, _ numbers: [Int], chat: Int? = nil) async throws -> UUID {
        let id = UUID()
        try await TestDatabase.withConnection(harness.url) { connection in
            try await connection.query(
                "INSERT INTO notifications (id, key_name, recipients, push_type) VALUES (\(id), 'backend', \(Int32(numbers.count)), 'alert')",
                logger: TestDatabase.logger
            )
            try await connection.query(
                """
                INSERT INTO push_queue (device_token, payload, notification_id)
                SELECT lpad(to_hex(g), 64, '0'), '{"aps":{"alert":"hi"}}', \(id) FROM unnest(\(numbers)::int8[]) g
                """,
                logger: TestDatabase.logger
            )
            if let chat {
                try await connection.query(
                    "INSERT INTO push_queue (device_token, payload) VALUES (\(PushHarness.token(chat)), '{\"aps\":{\"alert\":\"chat\"}}')",
                    logger: TestDatabase.logger
                )
            }
        }
        return id
    }

    static func configuration(_ harness: PushHarness, port: Int) -> Configuration {
        var configuration = harness.configuration()
        configuration.webhooks.privateHosts = ["127.0.0.1:\(port)"]
        configuration.webhooks.retryFirst = .milliseconds(200)
        return configuration
    }

    static func outbox(_ harness: PushHarness) async throws -> Int64 {
        try await TestDatabase.scalar(harness.url, "SELECT count(*) FROM webhook_outbox", as: Int64.self)
    }

    @Test func eventsAreSignedAndRetriedWithTheSameIDUntilTheReceiverTakesThem() async throws {
        var simulator = SimulatorTests.configuration()
        simulator.unregisteredTokens = [PushHarness.token(2)]
        try await PushHarness.run(simulator: simulator) { harness in
            let port = try FreePort.loopback()
            let secret = try Self.add(harness, "backend", port: port)
            let receiver = try await WebhookReceiver.start(secrets: [secret], fail: 2, port: port)
            defer { receiver.stop() }
            let id = try await Self.notify(harness, [1, 2, 3], chat: 4)
            // Over HTTP/2: the simulator answers token 2 with 410 Unregistered.
            var configuration = try harness.http2().0
            configuration.webhooks = Self.configuration(harness, port: port).webhooks
            try await harness.withDaemon(configuration) {
                try await harness.waitUntil(timeout: .seconds(30), "the notification's events are delivered") {
                    receiver.delivered.contains { $0.type == "notification.completed" } && receiver.delivered.count >= 5
                }
                try await harness.waitUntil(timeout: .seconds(10), "the outbox is empty") { try await Self.outbox(harness) == 0 }
            }
            let posts = receiver.posts
            // Each POST signed once, with the secret `add` printed, verified by Python's hmac; the headers as specified.
            #expect(posts.allSatisfy { $0.signatures == 1 && $0.verified == [true] })
            #expect(posts.allSatisfy { $0.contentType == "application/json" && $0.age < 60 && $0.path == "/hooks/pushchat?source=test" })
            // Every body as docs/openapi.yaml documents it (checked by jsonschema in the receiver).
            #expect(posts.allSatisfy { $0.schema == "conforms" }, "\(posts.map(\.schema))")
            // The two refused POSTs came again with the same webhook-id (and their events' ids).
            let refused = posts.filter { $0.answer == 500 }
            #expect(refused.count == 2)
            for post in refused {
                let again = posts.first { $0.n > post.n && $0.id == post.id && $0.answer == 200 }
                #expect(again != nil, "\(post.id) was taken later")
                #expect(again?.events.map(\.id) == post.events.map(\.id))
            }
            #expect(Set(posts.map(\.id)).allSatisfy { $0.hasPrefix("msg_") })
            // Every event once, none for the chat row (the webhook did not ask for chat).
            let delivered = receiver.delivered
            #expect(delivered.count == 5, "\(delivered.map(\.type))")
            #expect(Set(delivered.map(\.id)).count == delivered.count)
            let sent = delivered.filter { $0.type == "notification.sent" }
            #expect(Set(sent.map { $0.data["token"] ?? "" }) == [PushHarness.token(1), PushHarness.token(3)])
            #expect(sent.allSatisfy { $0.data["notification_id"] == id.uuidString.lowercased() && $0.data["app"] == "default" })
            #expect(sent.allSatisfy { $0.id.hasPrefix("evt_") && $0.timestamp.hasSuffix("Z") })
            let failed = delivered.filter { $0.type == "notification.failed" }
            #expect(failed.map { $0.data["token"] } == [PushHarness.token(2)])
            #expect(failed.first?.data["status"] == "410" && failed.first?.data["reason"] == "Unregistered", "\(failed)")
            let unregistered = delivered.filter { $0.type == "device.unregistered" }
            #expect(unregistered.map { $0.data["token"] } == [PushHarness.token(2)])
            let completed = delivered.filter { $0.type == "notification.completed" }
            #expect(completed.count == 1)
            #expect(completed.first?.data["sent"] == "2" && completed.first?.data["failed"] == "1", "\(completed)")
            #expect(!delivered.contains { $0.data["token"] == PushHarness.token(4) })
        }
    }

    @Test func aReceiverThatDoesNotAnswerInTimeIsTriedAgain() async throws {
        try await PushHarness.run { harness in
            let port = try FreePort.loopback()
            let secret = try Self.add(harness, "slow", port: port)
            let receiver = try await WebhookReceiver.start(secrets: [secret], delay: 15, port: port)
            defer { receiver.stop() }
            try await Self.notify(harness, [1])
            var configuration = Self.configuration(harness, port: port)
            configuration.webhooks.timeout = .seconds(10)
            try await harness.withDaemon(configuration) {
                try await harness.waitUntil(timeout: .seconds(40), "the events are taken after the first POST timed out") {
                    try await Self.outbox(harness) == 0 && receiver.posts.count >= 2
                }
            }
            let posts = receiver.posts
            // The first POST (answered after 15 s) was given up after 10 s and sent again, the same POST.
            let first = try #require(posts.first { $0.n == 1 })
            let again = try #require(posts.first { $0.n > 1 && $0.id == first.id }, "\(posts.map(\.id))")
            #expect((Int(again.timestamp) ?? 0) - (Int(first.timestamp) ?? 0) >= 9)
            #expect(posts.allSatisfy { $0.verified == [true] })
            #expect(Set(receiver.delivered.map(\.type)) == ["notification.sent", "notification.completed"])
        }
    }

    @Test func aKillMinus9AndAReceiverDownLoseNothing() async throws {
        try await PushHarness.run { harness in
            let port = try FreePort.loopback()
            let secret = try Self.add(harness, "durable", port: port, events: "notification.sent,notification.completed")
            let id = try await Self.notify(harness, Array(1...500))
            var environment = harness.environment(harness.configuration())
            environment["PUSHCHAT_WEBHOOK_PRIVATE_HOSTS"] = "127.0.0.1:\(port)"
            environment["PUSHCHAT_WEBHOOK_RETRY_FIRST"] = "0.2"
            // Nothing listens: every POST is refused while the daemon records its results.
            let (first, _) = try PushProcessTests.start(environment)
            try await harness.waitUntilAllSent(500)
            try await harness.waitUntil(timeout: .seconds(20), "a POST was tried and refused") {
                try await TestDatabase.scalar(harness.url, "SELECT count(*) FROM webhook_outbox WHERE attempts > 0", as: Int64.self) > 0
            }
            kill(first.processIdentifier, SIGKILL)
            _ = try await PushProcessTests.waitForExit(first, timeout: .seconds(5))
            let waiting = try await TestDatabase.scalar(
                harness.url,
                "SELECT coalesce(sum(event_count), 0)::int8 FROM webhook_outbox",
                as: Int64.self
            )
            // The 500 sent events are written with the results; the notification's completion is noted there too
            // and judged by the deliverer's sweep (once a second), which the kill may have come before.
            let noted = try await TestDatabase.scalar(
                harness.url,
                "SELECT count(*) FROM webhook_completions WHERE notification_id = \(id)",
                as: Int64.self
            )
            #expect(
                waiting == 501 || (waiting == 500 && noted == 1),
                "every event waits in the outbox, or its completion in the sweep's list: \(waiting), \(noted)"
            )
            // The receiver comes back, then a daemon.
            let receiver = try await WebhookReceiver.start(secrets: [secret], port: port)
            defer { receiver.stop() }
            let (second, _) = try PushProcessTests.start(environment)
            defer { second.terminate() }
            try await harness.waitUntil(timeout: .seconds(30), "every event is delivered") {
                Set(receiver.delivered.map(\.id)).count == 501
            }
            let delivered = receiver.delivered
            #expect(Set(delivered.filter { $0.type == "notification.sent" }.map { $0.data["token"] ?? "" }).count == 500)
            #expect(
                delivered.filter { $0.type == "notification.completed" }.map { $0.data["notification_id"] } == [id.uuidString.lowercased()]
            )
            #expect(receiver.posts.allSatisfy { $0.verified == [true] && $0.events.count <= 1000 && $0.schema == "conforms" })
            try await harness.waitUntil(timeout: .seconds(10), "the outbox is empty") { try await Self.outbox(harness) == 0 }
        }
    }

    @Test func aRotationSignsWithBothSecrets() async throws {
        try await PushHarness.run { harness in
            let port = try FreePort.loopback()
            let old = try Self.add(harness, "rotating", port: port)
            let rotated = try Self.cli(harness, ["rotate", "rotating"])
            #expect(rotated.status == 0, "\(rotated.standardError)")
            let new = rotated.standardOutput.split(separator: "\n").last.map(String.init) ?? ""
            #expect(new.hasPrefix("whsec_") && new != old)
            let listed = try Self.cli(harness, ["list"])
            #expect(listed.standardOutput.contains("rotating: two signatures"), "\(listed.standardOutput)")
            #expect(!listed.standardOutput.contains("whsec_"), "list shows no secret")
            let receiver = try await WebhookReceiver.start(secrets: [old, new], port: port)
            defer { receiver.stop() }
            try await Self.notify(harness, [1])
            try await harness.withDaemon(Self.configuration(harness, port: port)) {
                try await harness.waitUntil(timeout: .seconds(30), "the events are delivered") { receiver.delivered.count == 2 }
            }
            #expect(receiver.posts.allSatisfy { $0.signatures == 2 && $0.verified == [true, true] })
        }
    }

    @Test func urlsInsideTheNetworkAreRefusedAtAddAndAtSendTime() async throws {
        try await PushHarness.run { harness in
            let refusals: [(String, String)] = [
                ("http://127.0.0.1:9/x", "http only for a host listed in webhook_private_hosts"),
                ("https://127.0.0.1/x", "points inside the network"),
                ("https://localhost:8443/x", "points inside the network"),
                ("https://169.254.169.254/latest", "points inside the network"),
                ("https://10.1.2.3/x", "points inside the network"),
                ("https://[::1]:8443/x", "points inside the network"),
                ("https://user:pw@example.com/x", "no user or password"),
                ("ftp://example.com/x", "https"),
            ]
            for (url, reason) in refusals {
                let added = try Self.cli(harness, ["add", "inside", "--url", url])
                #expect(added.status != 0, "\(url)")
                #expect(added.standardError.contains(reason), "\(url): \(added.standardError)")
            }
            let bad = try Self.cli(harness, ["add", "bad", "--url", "https://example.com/", "--events", "notification.sent,nope"])
            #expect(bad.status != 0 && bad.standardError.contains("nope"), "\(bad.standardError)")
            #expect(try await TestDatabase.scalar(harness.url, "SELECT count(*) FROM webhooks", as: Int64.self) == 0)

            // Listed when added, not listed where the daemon runs: refused before any connection.
            let port = try FreePort.loopback()
            let added = try Self.cli(
                harness,
                ["add", "moved", "--url", "https://localhost:\(port)/x"],
                privateHosts: "localhost:\(port)"
            )
            #expect(added.status == 0, "\(added.standardError)")
            let receiver = try await WebhookReceiver.start(secrets: [], port: port)
            defer { receiver.stop() }
            try await Self.notify(harness, [1])
            var configuration = harness.configuration()
            configuration.webhooks.retryFirst = .milliseconds(200)
            try await harness.withDaemon(configuration) {
                try await harness.waitUntil(timeout: .seconds(30), "the POST is refused") {
                    let error = try await TestDatabase.scalar(
                        harness.url,
                        "SELECT coalesce(max(last_error), '') FROM webhooks WHERE name = 'moved'",
                        as: String.self
                    )
                    return error.contains("points inside the network")
                }
            }
            #expect(receiver.posts.isEmpty)
        }
    }

    @Test func aWebhookFailingForTheWholeRetryWindowIsDisabledAndStopsCollecting() async throws {
        try await PushHarness.run { harness in
            let port = try FreePort.loopback()
            let secret = try Self.add(harness, "failing", port: port)
            let failing = try await WebhookReceiver.start(secrets: [secret], fail: 1_000_000, port: port)
            try await Self.notify(harness, [1])
            // The default window (3 days): the receiver has been failing for that long once the first failure is in
            // (its streak moved back in time). A window of seconds would let the daemon's prune of what a disabled
            // webhook leaves past the window race the events this test expects to wait.
            var configuration = Self.configuration(harness, port: port)
            configuration.webhooks.retryFirst = .milliseconds(100)
            try await harness.withDaemon(configuration) {
                try await harness.waitUntil(timeout: .seconds(30), "the first POST fails") {
                    try await TestDatabase.scalar(harness.url, "SELECT count(*) FROM webhooks WHERE failures > 0", as: Int64.self) == 1
                }
                try await TestDatabase.admin(harness.url, "UPDATE webhooks SET failing_since = failing_since - interval '3 days'")
                try await harness.waitUntil(timeout: .seconds(30), "the webhook is disabled") {
                    try await TestDatabase.scalar(
                        harness.url,
                        "SELECT count(*) FROM webhooks WHERE disabled_at IS NOT NULL AND disabled_reason LIKE '%retry window%HTTP 500'",
                        as: Int64.self
                    ) == 1
                }
                // Disabled: new results write no events for it.
                let waiting = try await Self.outbox(harness)
                try await Self.notify(harness, [2, 3])
                try await harness.waitUntilAllSent(3)
                #expect(try await Self.outbox(harness) == waiting)
            }
            failing.stop()
            let listed = try Self.cli(harness, ["list"])
            #expect(listed.standardOutput.contains("retry window"), "\(listed.standardOutput)")
            #expect(failing.posts.count >= 2)
            // Enabled again with a receiver that answers: what waited is delivered.
            let receiver = try await WebhookReceiver.start(secrets: [secret], port: port)
            defer { receiver.stop() }
            #expect(try Self.cli(harness, ["enable", "failing"]).status == 0)
            try await harness.withDaemon(Self.configuration(harness, port: port)) {
                try await harness.waitUntil(timeout: .seconds(30), "what waited is delivered") { try await Self.outbox(harness) == 0 }
            }
            #expect(Set(receiver.delivered.map(\.type)) == ["notification.sent", "notification.completed"])
            #expect(receiver.delivered.allSatisfy { $0.data["token"] == nil || $0.data["token"] == PushHarness.token(1) })
        }
    }

    /// The README's dozen lines of Python verify the Standard Webhooks specification's own example (and refuse a
    /// wrong secret, a changed body and an old timestamp): what a backend developer copies works.
    @Test func theREADMEsVerifierChecksTheSpecificationsExample() throws {
        let readme = try String(contentsOf: TestDatabase.repositoryRoot.appendingPathComponent("README.md"), encoding: .utf8)
        let section = try #require(readme.components(separatedBy: "### Delivery events (webhooks)").dropFirst().first)
        let code = try #require(section.components(separatedBy: "```python\n").dropFirst().first?.components(separatedBy: "```").first)
        let check = """
            time = __import__("time")
            \(code)
            headers = {"webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek", "webhook-timestamp": "1614265330",
                       "webhook-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="}
            body = b'{"test": 2432232314}'
            secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
            time.time = lambda: 1614265330 + 10
            assert verify(secret, headers, body), "the example"
            assert verify(secret, dict(headers, **{"webhook-signature": "v1,bm90IGl0 " + headers["webhook-signature"]}), body)
            assert not verify("whsec_" + "A" * 32, headers, body), "another secret"
            assert not verify(secret, headers, body + b" "), "another body"
            time.time = lambda: 1614265330 + 301
            assert not verify(secret, headers, body), "an old timestamp"
            print("verified")
            """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", check]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        while process.isRunning { usleep(10_000) }
        #expect(process.terminationStatus == 0 && text.contains("verified"), "\(text)")
    }

    /// The simulator's receiver (`POST /webhooks` on its status page, as `scripts/run.sh` and the bench use it): with the
    /// webhook's secret it takes the daemon's POSTs, shows their events, and refuses a POST the secret did not sign.
    @Test func theSimulatorsPageReceivesAndChecksTheEvents() async throws {
        let secret = WebhookSecret.generate()
        var simulator = SimulatorTests.configuration()
        simulator.statusPort = 0
        simulator.webhookSecrets = [secret.text]
        try await PushHarness.run(simulator: simulator) { harness in
            let status = try #require(harness.ports.status)
            try await TestDatabase.withConnection(harness.url) { connection in
                try await connection.query(
                    """
                    INSERT INTO webhooks (name, app, url, secret, events)
                    VALUES ('simulator', 'default', \("http://127.0.0.1:\(status)/webhooks"), \(secret.text), '{notification.sent,notification.completed}')
                    """,
                    logger: TestDatabase.logger
                )
            }
            try await Self.notify(harness, [1, 2, 3])
            let inbox = harness.simulator.state.webhooks
            try await harness.withDaemon(Self.configuration(harness, port: status)) {
                try await harness.waitUntil(timeout: .seconds(30), "the simulator took the events") { inbox.counters.events == 4 }
            }
            #expect(inbox.counters.refused == 0)
            let screens = try await TLSTestClient.get(port: status, path: "/screens")
            #expect(screens.contains("<b data-counter=\"webhook-events\">4</b> delivery events"), "\(screens)")
            #expect(screens.contains("notification.completed"))
            // Signed with another secret: refused, not counted.
            let body = #"{"events":[]}"#
            let signature = WebhookSignature.header(
                id: "msg_1",
                timestamp: Int64(Date().timeIntervalSince1970),
                body: Array(body.utf8),
                secrets: [WebhookSecret.generate()]
            )
            let request =
                "POST /webhooks HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: application/json\r\n"
                + "webhook-id: msg_1\r\nwebhook-timestamp: \(Int64(Date().timeIntervalSince1970))\r\nwebhook-signature: \(signature)\r\n"
                + "Content-Length: \(body.utf8.count)\r\n\r\n\(body)"
            let answer = String(buffer: try await TLSTestClient.exchange(port: status, tls: nil, send: ByteBuffer(string: request)))
            #expect(answer.hasPrefix("HTTP/1.1 401"), "\(answer)")
            #expect(inbox.counters.refused == 1 && inbox.counters.events == 4)
        }
    }

    /// The daemon's `/metrics` carries each webhook's figures: events delivered, POSTs failed, what waits and how old.
    @Test func theFiguresArePerWebhook() async throws {
        try await PushHarness.run { harness in
            let port = try FreePort.loopback()
            let secret = try Self.add(harness, "crm", port: port, events: "notification.sent,notification.completed")
            let receiver = try await WebhookReceiver.start(secrets: [secret], fail: 1, port: port)
            defer { receiver.stop() }
            try await Self.notify(harness, [1, 2])
            // A POST of notification.sent events whose push_history rows were deleted by hand: nothing left to say, it
            // leaves the outbox unsent (neither delivered nor failed).
            try await TestDatabase.withConnection(harness.url) { connection in
                try await connection.query(
                    "INSERT INTO webhook_outbox (webhook_id, sent_ids, event_count) SELECT id, '{9000000001,9000000002}', 2 FROM webhooks",
                    logger: TestDatabase.logger
                )
            }
            try await harness.withDaemonStatus(Self.configuration(harness, port: port)) { status in
                try await harness.waitUntil(timeout: .seconds(30), "the events are delivered and sampled") {
                    let scrape = Scrape(try await TLSTestClient.get(port: status, path: "/metrics"))
                    return scrape[#"pushchat_webhook_delivered_total{webhook="crm"}"#] == 3
                        && scrape[#"pushchat_webhook_pending{webhook="crm"}"#] == 0
                }
                let scrape = Scrape(try await TLSTestClient.get(port: status, path: "/metrics"))
                #expect(scrape[#"pushchat_webhook_failed_attempts_total{webhook="crm"}"#] == 1)
                #expect(scrape[#"pushchat_webhook_oldest_pending_age_seconds{webhook="crm"}"#] == 0)
                #expect(scrape[#"pushchat_webhook_disabled{webhook="crm"}"#] == 0)
            }
            #expect(receiver.posts.allSatisfy { !$0.events.isEmpty }, "no POST without events")
            #expect(try await Self.outbox(harness) == 0)
        }
    }

    /// While a broadcast drains at full speed, its events wait until they are `webhook_broadcast_lag` old: with 60 s,
    /// none is POSTed during the drain and all of them right after it; with 0 (the control), they flow during it.
    @Test func eventsWaitWhileABroadcastDrainsAtFullSpeed() async throws {
        try await PushHarness.run { harness in
            let devices = 4_000
            try await BroadcastTests.seedDevices(harness.url, count: devices)
            let port = try FreePort.loopback()
            let secret = try Self.add(harness, "drains", port: port, events: "notification.sent")
            let receiver = try await WebhookReceiver.start(secrets: [secret], port: port)
            defer { receiver.stop() }
            for (round, lag) in [Duration.zero, .seconds(60)].enumerated() {
                let id = try await TestDatabase.withDatabaseClient(harness.url) { database in
                    let broadcast = BroadcastTests.notification(.all)
                    let store = ProviderStore(database: database, logger: TestDatabase.logger)
                    let outcome = try await store.queue(broadcast, maxRecipients: nil, backgroundAbove: 100)
                    #expect(outcome == .accepted(recipients: devices))
                    return broadcast.id
                }
                // Over HTTP/2, whose claims keep pace with the answers (the binary interface's claims run ahead of the
                // sending, up to its window).
                var configuration = try harness.http2().0
                configuration.webhooks = Self.configuration(harness, port: port).webhooks
                configuration.push.batchSize = 100
                configuration.webhooks.broadcastLag = lag
                let postsBefore = receiver.posts.count
                let postsDuringDrain = try await harness.withDaemon(configuration) {
                    // Sampled until 95% of the broadcast is sent: the POSTs the receiver had by then.
                    var during = 0
                    let deadline = ContinuousClock.now + .seconds(120)
                    while try await harness.count("notification_id = '\(id)' AND time_sent IS NOT NULL") < devices * 95 / 100 {
                        during = receiver.posts.count - postsBefore
                        guard ContinuousClock.now < deadline else { throw CancellationError() }
                        try await Task.sleep(for: .milliseconds(100))
                    }
                    try await harness.waitUntil(timeout: .seconds(60), "the broadcast's events are delivered") {
                        receiver.delivered.count >= devices * (round + 1)
                    }
                    return during
                }
                if lag == .zero {
                    #expect(postsDuringDrain > 0, "without a lag, events are POSTed while the broadcast drains")
                } else {
                    #expect(postsDuringDrain == 0, "\(postsDuringDrain) POSTs during the drain with a 60 s lag")
                }
            }
            let sent = receiver.delivered.filter { $0.type == "notification.sent" }
            #expect(sent.count == 2 * devices && Set(sent.map(\.id)).count == 2 * devices, "every event once")
            #expect(try await Self.outbox(harness) == 0)
        }
    }

    /// A broadcast expanded in the background by two daemons while they send it: one `notification.completed`, with
    /// every recipient counted, and each recipient's event once (the completion is judged after the last result).
    @Test func aBroadcastByTwoDaemonsCompletesOnce() async throws {
        try await PushHarness.run { harness in
            try await BroadcastTests.seedDevices(harness.url, count: 3_000)
            let port = try FreePort.loopback()
            let secret = try Self.add(harness, "broadcasts", port: port, events: "notification.sent,notification.completed")
            let receiver = try await WebhookReceiver.start(secrets: [secret], port: port)
            defer { receiver.stop() }
            let id = try await TestDatabase.withDatabaseClient(harness.url) { database in
                let store = ProviderStore(database: database, logger: TestDatabase.logger)
                let broadcast = BroadcastTests.notification(.all)
                let outcome = try await store.queue(broadcast, maxRecipients: nil, backgroundAbove: 100)
                #expect(outcome == .accepted(recipients: 3_000))
                return broadcast.id
            }
            let configuration = Self.configuration(harness, port: port)
            try await harness.withDaemons([configuration, configuration]) {
                try await harness.waitUntil(timeout: .seconds(60), "the broadcast's events are delivered") {
                    receiver.delivered.contains { $0.type == "notification.completed" } && receiver.delivered.count >= 3_001
                }
                try await Task.sleep(for: .seconds(2))
            }
            let delivered = receiver.delivered
            let completed = delivered.filter { $0.type == "notification.completed" }
            #expect(completed.count == 1, "\(completed.count) completed events")
            #expect(completed.first?.data["notification_id"] == id.uuidString.lowercased())
            #expect(completed.first?.data["sent"] == "3000" && completed.first?.data["queued"] == "3000", "\(completed)")
            let sent = delivered.filter { $0.type == "notification.sent" }
            #expect(sent.count == 3_000 && Set(sent.map(\.id)).count == 3_000)
            #expect(receiver.posts.allSatisfy { $0.events.count <= 1_000 && $0.schema == "conforms" })
        }
    }
}
