import Foundation
import NIOCore
import PostgresNIO
import Testing

@testable import API
@testable import APNs
@testable import Observability
@testable import Settings
@testable import Storage
@testable import Support

/// The whole system as `scripts/run.sh` starts it: the simulator, API, push daemon and feedback job as separate
/// processes on one database, driven over HTTP like the app.
@Suite struct SystemTests {
    final class Processes: Sendable {
        let list: [Process]
        init(_ list: [Process]) { self.list = list }
        func stop() {
            for process in list where process.isRunning { process.terminate() }
            for process in list { process.waitUntilExit() }
        }
    }

    static func launch(_ name: String, _ arguments: [String], environment: [String: String], output: String) throws -> Process {
        let process = Executable(name: name).process(arguments, environment: environment)
        _ = FileManager.default.createFile(atPath: output, contents: nil)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: output))
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
        return process
    }

    /// A fresh folder for one test's logs and files.
    static func workDirectory() throws -> String {
        let directory = NSTemporaryDirectory() + "pushchat-system-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        ServiceUser.own(directory)
        return directory
    }

    /// Where the simulator records what it accepted, in the test's folder.
    static let recordFile = "notifications.jsonl"

    /// Starts the simulator (with `simulator` arguments besides its certificates and record file), the API and the
    /// push daemon in `mode`, logging into `directory`; returns once the API answers.
    static func start(
        in directory: String,
        simulator: [String],
        mode: String,
        environment: [String: String],
        api: Int
    ) async throws -> Processes {
        let processes = Processes([
            try launch(
                "pushchat-apns-sim",
                ["--certs", TestCertificates.directory, "--no-status", "--record", directory + "/" + recordFile] + simulator,
                environment: [:],
                output: directory + "/sim.log"
            ),
            try launch("pushchat-api", ["serve", mode], environment: environment, output: directory + "/api.log"),
            try launch("pushchat-push", [mode], environment: environment, output: directory + "/push.log"),
        ])
        do {
            try await waitForPort(api)
        } catch {
            processes.stop()
            throw error
        }
        return processes
    }

    /// The processes' settings for production over HTTP/2 with token authentication against the simulator.
    static func http2Environment(url: DatabaseURL, api: Int, http2: Int, unused: Int) -> [String: String] {
        [
            "PUSHCHAT_DATABASE_URL": url.connectionString,
            "PUSHCHAT_API_HOST": "127.0.0.1",
            "PUSHCHAT_API_PORT": "\(api)",
            "PUSHCHAT_APNS_TRANSPORT": "http2",
            "PUSHCHAT_APNS_HOST": "127.0.0.1:\(http2)",
            "PUSHCHAT_APNS_TOPIC": PushHarness.topic,
            "PUSHCHAT_APNS_KEY_FILE": TestCertificates.path("AuthKey_DEVKEY0001.p8"),
            "PUSHCHAT_APNS_KEY_ID": PushHarness.keyID,
            "PUSHCHAT_APNS_TEAM_ID": PushHarness.teamID,
            "PUSHCHAT_APNS_CA_FILE": TestCertificates.path("ca.pem"),
            // Nothing listens here: the feedback job must not try it.
            "PUSHCHAT_APNS_FEEDBACK": "127.0.0.1:\(unused)",
            "PUSHCHAT_LOG_FILE": "-",
            "PUSHCHAT_PUSH_STATUS_PORT": "0",
            "PUSHCHAT_API_METRICS_PORT": "0",
        ]
    }

    /// The processes' settings for development over the binary interface against the simulator.
    static func binaryEnvironment(url: DatabaseURL, api: Int, gateway: Int, feedback: Int) -> [String: String] {
        [
            "PUSHCHAT_DATABASE_URL": url.connectionString,
            "PUSHCHAT_API_HOST": "127.0.0.1",
            "PUSHCHAT_API_PORT": "\(api)",
            "PUSHCHAT_APNS_TRANSPORT": "binary",
            "PUSHCHAT_APNS_GATEWAY": "127.0.0.1:\(gateway)",
            "PUSHCHAT_APNS_FEEDBACK": "127.0.0.1:\(feedback)",
            "PUSHCHAT_APNS_CERTIFICATE": TestCertificates.path("ck.pem"),
            "PUSHCHAT_APNS_PASSPHRASE": TestCertificates.passphrase,
            "PUSHCHAT_APNS_CA_FILE": TestCertificates.path("ca.pem"),
            "PUSHCHAT_LOG_FILE": "-",
            "PUSHCHAT_PUSH_SETTLE": "0.2",
            "PUSHCHAT_PUSH_STATUS_PORT": "0",
            "PUSHCHAT_API_METRICS_PORT": "0",
        ]
    }

    /// The simulator (HTTP/2 on `http2`, tokens in `directory/unregistered.txt` answered 410; its connections served on
    /// three threads, as the field bench runs it with more than one), API and push daemon in production mode.
    static func startOverHTTP2(in directory: String, environment: [String: String], http2: Int, api: Int) async throws -> Processes {
        if !FileManager.default.fileExists(atPath: directory + "/unregistered.txt") {
            try "".write(toFile: directory + "/unregistered.txt", atomically: true, encoding: .utf8)
        }
        return try await start(
            in: directory,
            simulator: [
                "--gateway-port", "0", "--feedback-port", "0", "--http2-port", "\(http2)", "--topic", PushHarness.topic,
                "--unregistered", directory + "/unregistered.txt", "--threads", "3",
            ],
            mode: "production",
            environment: environment,
            api: api
        )
    }

    /// The notifications the simulator recorded in `directory`, once `count` have arrived (within 20 s).
    static func arrived(in directory: String, count: Int) async throws -> [[String: Any]] {
        let deadline = ContinuousClock.now + .seconds(20)
        var lines: [Substring] = []
        while ContinuousClock.now < deadline {
            lines = ((try? String(contentsOfFile: directory + "/" + recordFile, encoding: .utf8)) ?? "").split(separator: "\n")
            if lines.count >= count { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        return lines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }

    /// The 2013 ("iOS 6") app's exact requests (AFNetworking form posts: cmd, user_id, token, name, code, text; the
    /// user_id an NSUUID without dashes, upper-case) beside a 2011 app (udid) in one room, over HTTP/2 in production.
    @Test func theTwentyThirteenAppsRequestsWorkBesideThe2011App() async throws {
        try await TestDatabase.withFreshDatabase { url in
            let directory = try Self.workDirectory()
            let (http2, api, unused) = (try Self.freePort(), try Self.freePort(), try Self.freePort())
            let environment = Self.http2Environment(url: url, api: api, http2: http2, unused: unused)
            let processes = try await Self.startOverHTTP2(in: directory, environment: environment, http2: http2, api: api)
            defer { processes.stop() }
            let annUserID = "9F3A61C2D4B84E0F8A7B6C5D4E3F2A1B"  // [[NSUUID UUID] UUIDString] without dashes
            let (annToken, annNewToken) = (String(repeating: "a1", count: 32), String(repeating: "a2", count: 32))
            let bobUDID = String(repeating: "2", count: 40)
            let bobToken = String(repeating: "b1", count: 32)
            for (form, expected) in [
                ("cmd=join&user_id=\(annUserID)&token=\(annToken)&name=Ann&code=demo", "200"),
                ("cmd=join&udid=\(bobUDID)&token=\(bobToken)&name=Bob&code=demo", "200"),
                ("cmd=message&user_id=\(annUserID)&text=Hi+Bob", "200"),
                ("cmd=message&udid=\(bobUDID)&text=Hi+Ann", "200"),
                ("cmd=update&user_id=\(annUserID)&token=\(annNewToken)", "200"),
                ("cmd=message&udid=\(bobUDID)&text=New+phone%3F", "200"),
                ("cmd=message&user_id=&text=lost", "400"),
                ("cmd=message&user_id=not-a-uuid&text=lost", "400"),
            ] {
                let response = try await Self.post(port: api, form)
                #expect(response.hasPrefix("HTTP/1.1 \(expected)"), "\(form): \(response)")
            }
            let refused = try await Self.post(port: api, "cmd=leave&user_id=")
            #expect(refused.contains("X-Error-Description: Missing user_id") || refused.contains("x-error-description: Missing user_id"))
            let arrived = try await Self.arrived(in: directory, count: 3)
            let seen = arrived.map { "\($0["token"] as? String ?? "") \($0["payload"] as? String ?? "")" }
            #expect(
                Set(seen) == [
                    #"\#(bobToken) {"aps":{"alert":"Ann: Hi Bob","sound":"default"}}"#,
                    #"\#(annToken) {"aps":{"alert":"Bob: Hi Ann","sound":"default"}}"#,
                    #"\#(annNewToken) {"aps":{"alert":"Bob: New phone?","sound":"default"}}"#,
                ],
                "\(seen)"
            )
            // The 2013 app's id is stored like a udid: lower-case hex, the same device for every command.
            let stored = try await TestDatabase.scalar(
                url,
                "SELECT udid || ' ' || device_token FROM active_users WHERE nickname = 'Ann'",
                as: String.self
            )
            #expect(stored == "\(annUserID.lowercased()) \(annNewToken)")
            #expect(try await Self.post(port: api, "cmd=leave&user_id=\(annUserID)").hasPrefix("HTTP/1.1 200"))
            #expect(try await TestDatabase.scalar(url, "SELECT string_agg(nickname, ',') FROM active_users", as: String.self) == "Bob")
        }
    }

    static func freePort() throws -> Int { try FreePort.loopback() }

    static func post(port: Int, _ form: String) async throws -> String {
        let request =
            "POST /api.php HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/x-www-form-urlencoded\r\n"
            + "Content-Length: \(form.utf8.count)\r\nConnection: close\r\n\r\n\(form)"
        return String(buffer: try await TLSTestClient.exchange(port: port, tls: nil, send: ByteBuffer(string: request)))
    }

    @Test func joinJoinMessageArrivesAtTheSimulatorThenFeedbackPrunes() async throws {
        try await TestDatabase.withFreshDatabase { url in
            let directory = try Self.workDirectory()
            let gateway = try Self.freePort()
            let feedback = try Self.freePort()
            let api = try Self.freePort()
            let pushStatus = try Self.freePort()
            let apiMetricsPort = try Self.freePort()
            let record = directory + "/" + Self.recordFile
            let feedbackFile = directory + "/feedback.txt"
            let bobToken = String(repeating: "cd", count: 32)
            try "\(bobToken) \(Int(Date().timeIntervalSince1970) + 5)\n".write(toFile: feedbackFile, atomically: true, encoding: .utf8)
            var environment = Self.binaryEnvironment(url: url, api: api, gateway: gateway, feedback: feedback)
            environment["PUSHCHAT_PUSH_STATUS_PORT"] = "\(pushStatus)"
            environment["PUSHCHAT_API_METRICS_PORT"] = "\(apiMetricsPort)"
            let processes = try await Self.start(
                in: directory,
                simulator: [
                    "--gateway-port", "\(gateway)", "--feedback-port", "\(feedback)", "--http2-port", "0", "--feedback", feedbackFile,
                ],
                mode: "development",
                environment: environment,
                api: api
            )
            defer { processes.stop() }
            let udid1 = String(repeating: "1", count: 40)
            let udid2 = String(repeating: "2", count: 40)
            let annToken = String(repeating: "ab", count: 32)
            for form in [
                "cmd=join&udid=\(udid1)&token=\(annToken)&name=Ann&code=demo",
                "cmd=join&udid=\(udid2)&token=\(bobToken)&name=Bob&code=demo",
                "cmd=message&udid=\(udid1)&text=Hello+Bob%21",
            ] {
                let response = try await Self.post(port: api, form)
                #expect(response.hasPrefix("HTTP/1.1 200"), "\(response)")
            }
            let deadline = ContinuousClock.now + .seconds(20)
            var lines: [String] = []
            while ContinuousClock.now < deadline {
                lines = ((try? String(contentsOfFile: record, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
                if !lines.isEmpty { break }
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(lines.count == 1)
            let arrived = try #require(try JSONSerialization.jsonObject(with: Data((lines.first ?? "{}").utf8)) as? [String: Any])
            #expect(arrived["token"] as? String == bobToken)
            #expect(arrived["payload"] as? String == #"{"aps":{"alert":"Ann: Hello Bob!","sound":"default"}}"#)
            // The row is stamped sent.
            try await Self.eventually {
                try await TestDatabase.scalar(url, "SELECT count(*) FROM push_deliveries WHERE time_sent IS NOT NULL", as: Int64.self) == 1
            }

            // The operator's view: the daemon is ready and counted the notification; the API counted the requests.
            #expect(try await LoopbackHTTP.get(port: pushStatus, path: "/readyz").status == 200)
            try await Self.eventually { try await LoopbackHTTP.scrape(port: pushStatus)["pushchat_push_sent"] == 1 }
            #expect(try await LoopbackHTTP.get(port: api, path: "/metrics").status == 404, "not on the public port")
            let apiMetrics = try await LoopbackHTTP.scrape(port: apiMetricsPort)
            #expect(apiMetrics[#"pushchat_api_requests{command="join",status="200"}"#] == 2)
            #expect(apiMetrics[#"pushchat_api_requests{command="message",status="200"}"#] == 1)

            // Apple reports Bob's app gone (after he registered): the feedback job removes him.
            let job = try Executable(name: "pushchat-feedback").run(["development"], environment: environment)
            #expect(job.status == 0, "\(job.standardError)")
            #expect(job.standardOutput.contains("Feedback: 1 tuples read, 1 users deleted, 0 kept because re-registered"))
            let left = try await TestDatabase.scalar(url, "SELECT string_agg(nickname, ',') FROM active_users", as: String.self)
            #expect(left == "Ann")
        }
    }

    /// The same path over today's HTTP/2 API with token authentication, as in production: one token answered
    /// 410 Unregistered, the row failed with that reason, and the feedback job (no feedback service and no certificate
    /// with HTTP/2) prunes the user from the push daemon's report.
    @Test func overHTTP2AMessageArrivesAnd410IsPrunedWithoutAFeedbackService() async throws {
        try await TestDatabase.withFreshDatabase { url in
            let directory = try Self.workDirectory()
            let (http2, api, unused) = (try Self.freePort(), try Self.freePort(), try Self.freePort())
            let record = directory + "/" + Self.recordFile
            let carlToken = String(repeating: "ef", count: 32)
            let bobToken = String(repeating: "cd", count: 32)
            try "\(bobToken)\n".write(toFile: directory + "/unregistered.txt", atomically: true, encoding: .utf8)
            let environment = Self.http2Environment(url: url, api: api, http2: http2, unused: unused)
            let processes = try await Self.startOverHTTP2(in: directory, environment: environment, http2: http2, api: api)
            defer { processes.stop() }
            let (ann, bob, carl) = (String(repeating: "1", count: 40), String(repeating: "2", count: 40), String(repeating: "3", count: 40))
            for form in [
                "cmd=join&udid=\(ann)&token=\(String(repeating: "ab", count: 32))&name=Ann&code=demo",
                "cmd=join&udid=\(bob)&token=\(bobToken)&name=Bob&code=demo",
                "cmd=join&udid=\(carl)&token=\(carlToken)&name=Carl&code=demo",
                "cmd=message&udid=\(ann)&text=Hi+all",
            ] {
                let response = try await Self.post(port: api, form)
                #expect(response.hasPrefix("HTTP/1.1 200"), "\(response)")
            }
            try await Self.eventually {
                try await TestDatabase.scalar(
                    url,
                    "SELECT count(*) FROM push_deliveries WHERE time_sent IS NOT NULL OR time_failed IS NOT NULL",
                    as: Int64.self
                ) == 2
            }
            let lines = ((try? String(contentsOfFile: record, encoding: .utf8)) ?? "").split(separator: "\n")
            #expect(lines.count == 1)
            let arrived = try #require(try JSONSerialization.jsonObject(with: Data((lines.first ?? "{}").utf8)) as? [String: Any])
            #expect(arrived["token"] as? String == carlToken)
            #expect(arrived["format"] as? String == "http2")
            #expect(arrived["payload"] as? String == #"{"aps":{"alert":"Ann: Hi all","sound":"default"}}"#)
            let failure = try await TestDatabase.scalar(
                url,
                "SELECT device_token || ' ' || last_status || ' ' || last_error FROM push_deliveries WHERE time_failed IS NOT NULL",
                as: String.self
            )
            #expect(failure == "\(bobToken) 410 Unregistered")

            // Apple's 410 timestamp is a minute old in the simulator; Bob registered before it (an hour ago).
            try await TestDatabase.admin(url, "UPDATE active_users SET token_updated_at = now() - interval '1 hour' WHERE nickname = 'Bob'")
            let job = try Executable(name: "pushchat-feedback").run(["production"], environment: environment)
            #expect(job.status == 0, "\(job.standardError)")
            #expect(job.standardOutput.contains("Feedback: no feedback service (HTTP/2), 1 users deleted, 0 kept because re-registered"))
            let left = try await TestDatabase.scalar(
                url,
                "SELECT string_agg(nickname, ',' ORDER BY nickname) FROM active_users",
                as: String.self
            )
            #expect(left == "Ann,Carl")
        }
    }

    /// The simulator refuses a number of threads it cannot use, with the reason, before it listens.
    @Test func theSimulatorRefusesZeroThreads() throws {
        let run = try Executable(name: "pushchat-apns-sim").run(
            [
                "--certs", TestCertificates.directory, "--no-status", "--gateway-port", "0", "--feedback-port", "0", "--http2-port", "0",
                "--threads", "0",
            ],
            environment: [:]
        )
        #expect(run.status == 1)
        #expect(run.standardError.contains("--threads must be 1 to 64, not 0"), "\(run.standardError)")
    }

    static func waitForPort(_ port: Int) async throws {
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline {
            if (try? await TLSTestClient.get(port: port, path: "/")) != nil { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        Issue.record("nothing answered on port \(port)")
    }

    static func eventually(_ condition: @Sendable () async throws -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            if try await condition() { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        Issue.record("condition not met within 10 s")
    }
}
