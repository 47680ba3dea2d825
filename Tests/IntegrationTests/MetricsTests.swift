import APNsTransport
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import PostgresNIO
import Testing

@testable import API
@testable import APIServer
@testable import APNs
@testable import Feedback
@testable import Observability
@testable import Push
@testable import Settings
@testable import Simulator
@testable import Storage
@testable import Support

/// Each metric moves when its event happens: scrape, act, scrape again.
@Suite struct APIMetricsTests {
    @Test func requestsAreCountedByCommandAndStatusWithTheirDurations() async throws {
        try await APIHarness.run { api in
            #expect(try await api.get("/metrics").status == .notFound, "not on the API's public port")
            let before = Scrape(try await api.metrics().body)
            try await api.post(["cmd": "join", "udid": Device.udid(1), "token": Device.token(1), "name": "Ann", "code": "room"])
            try await api.post(["cmd": "join", "udid": Device.udid(2), "token": Device.token(2), "name": "Bob", "code": "room"])
            try await api.post(["cmd": "join", "udid": Device.udid(3), "token": Device.token(3), "name": "Cy", "code": "room"])
            try await api.post(["cmd": "message", "udid": Device.udid(1), "text": "hi"])
            try await api.post(["cmd": "dance", "udid": Device.udid(1)])
            let response = try await api.metrics()
            #expect(response.status == 200)
            #expect(response.contentType?.hasPrefix("text/plain; version=0.0.4") == true)
            let after = Scrape(response.body)
            let join = #"pushchat_api_requests{command="join",status="200"}"#
            #expect(after.number(join) - (before[join] ?? 0) == 3, "no join before this test")
            #expect(after.sum("pushchat_api_requests", where: ["command": "message", "status": "200"]) == 1)
            #expect(after.sum("pushchat_api_requests", where: ["command": "unparsed", "status": "400"]) == 1)
            #expect(
                after.number("pushchat_api_notifications_queued") - before.number("pushchat_api_notifications_queued") == 2,
                "Bob and Cy"
            )
            #expect(after[#"pushchat_api_request_duration_count{command="join"}"#] == 3)
            #expect(after.text.contains(#"pushchat_api_request_duration_bucket{command="join",le="+Inf"} 3"#))
        }
    }

    @Test func theBodyLimitIsConfigurableAndLargerBodiesWriteNothing() async throws {
        try await TestDatabase.withFreshDatabase { url in
            var configuration = APIHarness.configuration(url: url)
            configuration.limits.maxBodyBytes = 300
            try await APIHarness.run(configuration: configuration) { api in
                let name = String(repeating: "x", count: 20)
                let small = "cmd=join&udid=\(Device.udid(1))&token=\(Device.token(1))&name=\(name)&code=room"
                let large = small + "&pad=" + String(repeating: "p", count: 300)
                let refused = try await api.post(body: ByteBuffer(string: large), contentType: "application/x-www-form-urlencoded")
                #expect(refused.status == .contentTooLarge)
                #expect(try await api.count("active_users") == 0)
                let accepted = try await api.post(body: ByteBuffer(string: small), contentType: "application/x-www-form-urlencoded")
                #expect(accepted.status == .ok)
                let scrape = Scrape(try await api.metrics().body)
                #expect(scrape.sum("pushchat_api_requests", where: ["status": "413"]) == 1)
            }
        }
    }

    @Test func aBadBodyLimitIsRefusedNamingTheKey() throws {
        #expect(throws: ConfigurationError.self) {
            try Configuration.load(
                mode: .development,
                path: "/nonexistent-pushchat.json",
                environment: ["PUSHCHAT_DATABASE_URL": "postgres://u@127.0.0.1/db", "PUSHCHAT_API_MAX_BODY": "12"]
            )
        }
        do {
            _ = try Configuration.load(
                mode: .development,
                path: nil,
                environment: ["PUSHCHAT_DATABASE_URL": "postgres://u@127.0.0.1/db", "PUSHCHAT_API_MAX_BODY": "lots"]
            )
            Issue.record("accepted api_max_body=lots")
        } catch {
            #expect(error.description.contains("PUSHCHAT_API_MAX_BODY"))
        }
    }
}

@Suite(.serialized) struct PushMetricsTests {
    @Test func sentFailedQueueDepthAndConnectionMoveWithTheirEvents() async throws {
        var simulator = SimulatorTests.configuration()
        simulator.unregisteredTokens = [PushHarness.token(3)]
        try await PushHarness.run(simulator: simulator) { harness in
            try await harness.withDaemonStatus { port in
                #expect(try await LoopbackHTTP.get(port: port, path: "/healthz").status == 200)
                try await harness.waitUntil("the daemon is connected and ready") {
                    try await LoopbackHTTP.get(port: port, path: "/readyz").status == 200
                }
                let before = try await LoopbackHTTP.scrape(port: port)
                #expect(before[#"pushchat_gateway_connected{app="default",platform="apns"}"#] == 1)
                #expect(before["pushchat_push_sent"] == 0)
                // The client certificate's expiry, for the alert a month ahead.
                let expiry = try harness.configuration().apns.loadIdentity().notValidAfter
                #expect(expiry.timeIntervalSinceNow > 86_400)
                #expect(before["pushchat_apns_certificate_expiry_seconds"] == expiry.timeIntervalSince1970)
                #expect(before[#"pushchat_app_certificate_expiry_seconds{app="default"}"#] == expiry.timeIntervalSince1970)
                try await harness.queue(20)
                try await harness.waitUntil("19 sent and 1 failed") { try await harness.sentAndFailed() == [19, 1] }
                try await harness.waitUntil("the metrics show it") {
                    let scrape = try await LoopbackHTTP.scrape(port: port)
                    return scrape["pushchat_push_sent"] == 19
                        && scrape[#"pushchat_push_failed{reason="invalid_token"}"#] == 1
                }
                let after = try await LoopbackHTTP.scrape(port: port)
                #expect(after.number("pushchat_push_claim_duration_count") > before.number("pushchat_push_claim_duration_count"))
                #expect(after.number("pushchat_push_mark_duration_count") > before.number("pushchat_push_mark_duration_count"))
                #expect(after.number("pushchat_gateway_reconnects") >= 1, "the invalid token closed the connection")
                // The 20 rows went out in one write: those behind the refused third were written on a connection the
                // gateway closed, and went out again on the next.
                #expect(before["pushchat_push_resent"] == 0)
                #expect(after.number("pushchat_push_resent") >= 1, "rows written after the refused one are sent again")
            }
        }
    }

    @Test func queueDepthAndOldestAgeAreSampled() async throws {
        var simulator = SimulatorTests.configuration()
        simulator.faults.refuseConnectionsFor = .seconds(60)
        try await PushHarness.run(simulator: simulator) { harness in
            try await TestDatabase.withConnection(harness.url) { connection in
                try await connection.query(
                    "INSERT INTO push_queue (device_token, payload, time_queued) VALUES ('00', '{}', now() - interval '90 seconds')",
                    logger: TestDatabase.logger
                )
            }
            try await harness.queue(4)
            try await harness.withDaemonStatus { port in
                try await harness.waitUntil("the depth is sampled") {
                    try await LoopbackHTTP.scrape(port: port)["pushchat_queue_depth"] == 5
                }
                var scrape = try await LoopbackHTTP.scrape(port: port)
                #expect(scrape.number("pushchat_queue_oldest_pending_age") >= 90)
                #expect(scrape[#"pushchat_gateway_connected{app="default",platform="apns"}"#] == 0)
                // By app and platform (the queue-late alert's figures): the same rows, a disabled app's left out.
                try await harness.waitUntil("the lanes are sampled") {
                    try await LoopbackHTTP.scrape(port: port)[#"pushchat_app_pending{app="default",platform="apns"}"#] == 5
                }
                scrape = try await LoopbackHTTP.scrape(port: port)
                #expect(scrape.number(#"pushchat_app_oldest_pending_age_seconds{app="default",platform="apns"}"#) >= 90)
                #expect(scrape[#"pushchat_app_pending{app="default",platform="fcm"}"#] == 0)
                #expect(scrape["pushchat_database_up"] == 1)
                let ready = try await LoopbackHTTP.get(port: port, path: "/readyz")
                #expect(ready.status == 503)
                #expect(ready.body.contains("not connected to the gateway"))
            }
        }
    }
}

@Suite struct FeedbackMetricsTests {
    @Test func aRunLeavesItsFiguresInATextfile() throws {
        var report = FeedbackReport()
        report.tuplesRead = 7
        report.deletedByFeedback = 5
        report.keptByFeedback = 2
        // Written as node_exporter's textfile collector reads it: whole (renamed into place), readable by all.
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("feedback-metrics-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("pushchat_feedback.prom").path
        try TextfileMetrics.write(
            FeedbackMetrics.exposition(
                report: report,
                duration: .milliseconds(1500),
                finishedAt: Date(timeIntervalSince1970: 1_800_000_000)
            ),
            to: path
        )
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["pushchat_feedback.prom"], "no temporary left")
        let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
        #expect(mode == 0o644)
        let scrape = Scrape(try String(contentsOfFile: path, encoding: .utf8))
        #expect(scrape["pushchat_feedback_tuples_read"] == 7)
        #expect(scrape["pushchat_feedback_users_deleted"] == 5)
        #expect(scrape["pushchat_feedback_users_kept"] == 2)
        #expect(scrape["pushchat_feedback_success"] == 1)
        #expect(scrape["pushchat_feedback_duration_seconds"] == 1.5)
        #expect(scrape["pushchat_feedback_last_run_timestamp_seconds"] == 1_800_000_000)
        let failed = Scrape(
            String(decoding: FeedbackMetrics.exposition(report: nil, duration: .seconds(1), finishedAt: Date()), as: UTF8.self)
        )
        #expect(failed["pushchat_feedback_success"] == 0)
    }
}

/// `/readyz` follows PostgreSQL: it stops answering, readiness goes; it comes back, readiness returns.
@Suite(.serialized) struct ReadinessTests {
    static func throughProxy(_ url: DatabaseURL, _ body: @Sendable (DatabaseURL, TCPProxy) async throws -> Void) async throws {
        let proxy = TCPProxy(upstreamPort: url.port)
        try await proxy.start()
        try await body(TestDatabase.through(url, port: proxy.port), proxy)
        await proxy.stop()
    }

    @Test func theAPIIsNotReadyWhilePostgreSQLIsDown() async throws {
        try await TestDatabase.withFreshDatabase { url in
            try await Self.throughProxy(url) { proxied, proxy in
                try await APIHarness.run(configuration: APIHarness.configuration(url: proxied), databaseTimeout: .seconds(2)) { api in
                    #expect(try await api.get("/readyz").status == .ok)
                    await proxy.stop()
                    // /readyz answers from the probe's last word (one query a second): down within about a second.
                    var down = try await api.get("/readyz")
                    let stopped = ContinuousClock.now
                    while down.status == .ok, stopped.duration(to: .now) < .seconds(3) {
                        try await Task.sleep(for: .milliseconds(100))
                        down = try await api.get("/readyz")
                    }
                    #expect(down.status == .serviceUnavailable)
                    #expect(String(buffer: down.body).contains("database unreachable"))
                    #expect(try await api.get("/healthz").status == .ok, "the process itself is alive")
                    try await proxy.start()
                    let deadline = ContinuousClock.now + .seconds(20)
                    var status = HTTPResponse.Status.serviceUnavailable
                    while status != .ok, ContinuousClock.now < deadline {
                        try await Task.sleep(for: .milliseconds(200))
                        status = try await api.get("/readyz").status
                    }
                    #expect(status == .ok, "ready again once PostgreSQL is back")
                }
            }
        }
    }

    @Test func theDaemonIsNotReadyWhilePostgreSQLIsDown() async throws {
        try await PushHarness.run { harness in
            try await Self.throughProxy(harness.url) { proxied, proxy in
                try await harness.withDaemonStatus(harness.configuration(url: proxied)) { port in
                    try await harness.waitUntil("ready") { try await LoopbackHTTP.get(port: port, path: "/readyz").status == 200 }
                    await proxy.stop()
                    // /readyz answers from the probe's last word (one query a second): down within about a second.
                    var down = try await LoopbackHTTP.get(port: port, path: "/readyz")
                    let stopped = ContinuousClock.now
                    while down.status == 200, stopped.duration(to: .now) < .seconds(3) {
                        try await Task.sleep(for: .milliseconds(100))
                        down = try await LoopbackHTTP.get(port: port, path: "/readyz")
                    }
                    #expect(down.status == 503)
                    #expect(down.body.contains("database unreachable"))
                    #expect(try await LoopbackHTTP.scrape(port: port)["pushchat_database_up"] == 0, "the alerts see the outage")
                    try await proxy.start()
                    try await harness.waitUntil("ready again") {
                        try await LoopbackHTTP.get(port: port, path: "/readyz").status == 200
                    }
                    try await harness.queue(5)
                    try await harness.waitUntilAllSent(5)
                }
            }
        }
    }
}
