import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import NIOPosix
import PostgresNIO
import Testing

@testable import API
@testable import Settings
@testable import Storage
@testable import Support

/// The API on the open internet: idle and stalled connections, a flood from one address, the fan-out budget, and
/// what production does not serve. Each limit is passed and the answer and the database checked.
@Suite(.serialized) struct ExposureTests {
    static func run(
        _ limits: APILimits,
        mode: Mode = .development,
        _ body: @escaping @Sendable (APIHarness) async throws -> Void
    ) async throws {
        try await TestDatabase.withFreshDatabase { url in
            var configuration = APIHarness.configuration(url: url, mode: mode)
            configuration.limits = limits
            try await APIHarness.run(configuration: configuration, body)
        }
    }

    /// A raw connection from `source` (a loopback address) that sends `bytes` and then waits: the channel, and a
    /// future completing when the server closes it.
    static func connect(port: Int, from source: String = "127.0.0.1", sending bytes: String = "") async throws -> any Channel {
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .bind(to: try SocketAddress(ipAddress: source, port: 0))
            .connect(host: "127.0.0.1", port: port)
            .get()
        if !bytes.isEmpty { try await channel.writeAndFlush(ByteBuffer(string: bytes)).get() }
        return channel
    }

    /// Waits (bounded) until the server counts at least `count` open connections (`pushchat_api_connections`).
    static func waitForConnections(_ api: APIHarness, atLeast count: Double) async throws {
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            if (Scrape(try await api.metrics().body)["pushchat_api_connections"] ?? 0) >= count { return }
            try await Task.sleep(for: .milliseconds(20))
        }
        Issue.record("the server never counted \(count) connections")
    }

    static func closedWithin(_ channel: any Channel, _ limit: Duration) async -> Bool {
        (try? await withDeadline(limit) { try await channel.closeFuture.get() }) != nil
    }

    @Test func idleAndStalledConnectionsAreClosedAndOneAddressCannotHoldThemAll() async throws {
        var limits = APILimits.unlimited
        limits.maxConnectionsPerIP = 20
        limits.headerTimeout = .milliseconds(800)
        limits.bodyTimeout = .milliseconds(800)
        limits.idleTimeout = .milliseconds(1500)
        try await Self.run(limits) { api in
            let port = try #require(api.client.port)
            // 20 idle connections and a half-sent request from one address hold its whole allowance… (127.0.0.3: the
            // harness's own client may hold a kept-alive connection from 127.0.0.1, which would count against it)
            let flood = "127.0.0.3"
            var held: [any Channel] = []
            for _ in 0..<19 { held.append(try await Self.connect(port: port, from: flood)) }
            held.append(try await Self.connect(port: port, from: flood, sending: "POST /api.php HTTP/1.1\r\nHost: x\r\nContent-Le"))
            try await Self.waitForConnections(api, atLeast: 20)
            let refused = try await Self.connect(port: port, from: flood)
            #expect(await Self.closedWithin(refused, .milliseconds(500)), "the 21st connection from one address is closed at once")
            // …while another address is served.
            let other = try await TLSTestClient.exchange(
                port: port,
                tls: nil,
                send: ByteBuffer(string: "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
                timeout: .seconds(5),
                from: "127.0.0.2"
            )
            #expect(String(buffer: other).hasPrefix("HTTP/1.1 200"))
            // The stalled and idle ones are closed by the server within their timeouts.
            for channel in held { #expect(await Self.closedWithin(channel, .seconds(5))) }
            // A kept-alive connection is closed after the idle timeout, not before.
            let opened = ContinuousClock.now
            let kept = try await Self.connect(port: port, sending: "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(await Self.closedWithin(kept, .seconds(5)))
            #expect(opened.duration(to: .now) >= .milliseconds(1500), "answered, then kept for api_idle_timeout")
            #expect(try await api.count("active_users") == 0)
        }
    }

    /// An answer sent before the body ended (`GET /healthz` with `Content-Length: 1`), then the last byte: the connection
    /// is idle and closed after the idle limit (before, it had no deadline left and stayed open for good). And all
    /// addresses together hold at most `api_max_connections`.
    @Test func earlyAnswersKeepTheirDeadlinesAndAllAddressesTogetherAreCapped() async throws {
        var limits = APILimits.unlimited
        limits.headerTimeout = .seconds(2)
        limits.bodyTimeout = .seconds(2)
        limits.idleTimeout = .milliseconds(1500)
        limits.maxConnections = 30
        try await Self.run(limits) { api in
            let port = try #require(api.client.port)
            var early: [any Channel] = []
            for n in 0..<24 {
                early.append(
                    try await Self.connect(
                        port: port,
                        from: "127.0.0.\(n % 3 + 1)",
                        sending: "GET \(n % 2 == 0 ? "/healthz" : "/nowhere") HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\n"
                    )
                )
            }
            try await Task.sleep(for: .milliseconds(300))
            for channel in early { try await channel.writeAndFlush(ByteBuffer(string: "x")).get() }
            let sent = ContinuousClock.now
            for channel in early { #expect(await Self.closedWithin(channel, .seconds(4)), "closed by the idle limit") }
            #expect(sent.duration(to: .now) >= .milliseconds(1200), "not before the idle limit")
            // 36 from four addresses: the server keeps 30 (the test client's own connection may hold one of them).
            var held: [any Channel] = []
            for n in 0..<36 { held.append(try await Self.connect(port: port, from: "127.0.0.\(n % 4 + 1)")) }
            try await Self.waitForConnections(api, atLeast: 29)
            // The server closes the ones past its limit at once; wait (bounded) until this side has seen it.
            let counted = ContinuousClock.now
            while held.filter({ $0.isActive }).count > 30, counted.duration(to: .now) < .seconds(5) {
                try await Task.sleep(for: .milliseconds(20))
            }
            let open = held.filter { $0.isActive }.count
            #expect(open == 29 || open == 30, "\(open) open: api_max_connections is 30 over all addresses")
            for channel in held { try? await channel.close() }
        }
    }

    @Test func aBodyThatNeverCompletesIsCutAndWritesNothing() async throws {
        var limits = APILimits.unlimited
        limits.bodyTimeout = .milliseconds(500)
        try await Self.run(limits) { api in
            let port = try #require(api.client.port)
            let form = "cmd=join&udid=\(Device.udid(1))&token=0&name=Ann&code=room"
            let channel = try await Self.connect(
                port: port,
                sending: "POST /api.php HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\n"
                    + "Content-Length: \(form.utf8.count + 10)\r\n\r\n\(form)"
            )
            #expect(await Self.closedWithin(channel, .seconds(5)))
            #expect(try await api.count("active_users") == 0)
        }
    }

    /// Members 1…`members` in room `big` (udids and tokens from their numbers).
    static func bigRoom(_ api: APIHarness, members: Int) async throws {
        try await TestDatabase.withConnection(api.url) { connection in
            try await connection.query(
                """
                INSERT INTO active_users (udid, device_token, nickname, alert_name, secret_code)
                SELECT lpad(to_hex(g), 40, '0'), lpad(to_hex(g + 100000), 64, '0'), 'm' || g, 'm' || g, 'big'
                FROM generate_series(1, \(members)) g
                """,
                logger: TestDatabase.logger
            )
        }
    }

    /// One address sending messages into a big room: the budget counts recipients; past it 429 and nothing queued.
    @Test func theFanOutBudgetCountsRecipientsAndRefusesPastIt() async throws {
        var limits = APILimits.unlimited
        limits.fanOutPerIP = 200  // 100 at once
        try await Self.run(limits) { api in
            try await Self.bigRoom(api, members: 61)
            let first = try await api.postAlone("cmd=message&udid=\(String(repeating: "0", count: 39))1&text=one")
            #expect(first.status == 200)
            #expect(try await api.count("push_queue") == 60)
            let second = try await api.postAlone("cmd=message&udid=\(String(repeating: "0", count: 39))2&text=two")
            #expect(second.status == 429, "60 more would pass the 100 at once")
            #expect(Int(second.retryAfter ?? "") ?? 0 >= 1)
            #expect(try await api.count("push_queue") == 60, "nothing queued")
            #expect(try await api.count("messages") == 1, "nothing stored")
        }
    }

    /// `api_fanout_per_udid` holds one device to its own budget while another device from the same address (the
    /// per-address budget off) still sends; the refused message stores and queues nothing.
    @Test func theFanOutBudgetPerDeviceLimitsOneDeviceAndNotItsNeighbour() async throws {
        var limits = APILimits.unlimited
        limits.fanOutPerUDID = 200  // 100 at once per device
        try await Self.run(limits) { api in
            try await Self.bigRoom(api, members: 61)
            let first = String(repeating: "0", count: 39) + "1"
            let neighbour = String(repeating: "0", count: 39) + "2"
            #expect(try await api.postAlone("cmd=message&udid=\(first)&text=one").status == 200)
            #expect(try await api.count("push_queue") == 60)
            let again = try await api.postAlone("cmd=message&udid=\(first)&text=two")
            #expect(again.status == 429, "60 more would pass this device's 100 at once")
            #expect(Int(again.retryAfter ?? "") ?? 0 >= 1)
            #expect(try await api.count("push_queue") == 60, "nothing queued")
            #expect(try await api.count("messages") == 1, "nothing stored")
            #expect(try await api.postAlone("cmd=message&udid=\(neighbour)&text=three").status == 200, "its own budget")
            #expect(try await api.count("push_queue") == 120)
        }
    }

    /// The budget reserves a sender's last recipient count; a room that grew since is paid again exactly, never
    /// queued beyond what was reserved.
    @Test func aRoomThatGrewSinceTheLastMessageIsPaidExactly() async throws {
        var limits = APILimits.unlimited
        limits.fanOutPerIP = 2000
        try await Self.run(limits) { api in
            @Sendable func members(_ range: ClosedRange<Int>) async throws {
                try await TestDatabase.withConnection(api.url) { connection in
                    try await connection.query(
                        PostgresQuery(
                            unsafeSQL: """
                                INSERT INTO active_users (udid, device_token, nickname, alert_name, secret_code)
                                SELECT lpad(to_hex(g), 40, '0'), lpad(to_hex(g + 100000), 64, '0'), 'm' || g, 'm' || g, 'big'
                                FROM generate_series(\(range.lowerBound), \(range.upperBound)) g
                                """
                        ),
                        logger: TestDatabase.logger
                    )
                }
            }
            try await members(1...11)
            let sender = "cmd=message&udid=\(String(repeating: "0", count: 39))1&text="
            #expect(try await api.postAlone(sender + "one").status == 200)
            #expect(try await api.count("push_queue") == 10)
            try await members(12...41)
            #expect(try await api.postAlone(sender + "two").status == 200)
            #expect(try await api.count("push_queue") == 50, "10, then the 40 the room has now")
        }
    }

    /// Behind a trusted proxy each client has its own budget; a client cannot escape by writing X-Forwarded-For itself.
    @Test func trustedProxiesAreBelievedOthersAreNot() async throws {
        var limits = APILimits.unlimited
        limits.ratePerIP = 0.01
        limits.burstPerIP = 1
        limits.trustedProxies = [CIDR("127.0.0.1/32")!]
        try await Self.run(limits) { api in
            @Sendable func join(_ n: Int, _ forwarded: String) async throws -> (status: Int, retryAfter: String?) {
                try await api.postAlone(
                    "cmd=join&udid=\(Device.udid(n))&token=0&name=n&code=r",
                    headers: "X-Forwarded-For: \(forwarded)\r\n"
                )
            }
            var statuses: [Int] = []
            for (n, forwarded) in [
                (1, "198.51.100.1"), (2, "198.51.100.2"), (3, "198.51.100.1"), (4, "198.51.100.1, 2001:db8::1"), (5, "2001:db8::2"),
            ] {
                statuses.append(try await join(n, forwarded).status)
            }
            // Two clients behind the proxy each get their own allowance; the first one again is refused; in a list the
            // rightmost untrusted address counts (a client may write anything to its left); IPv6 by /64.
            #expect(statuses == [200, 200, 429, 200, 429])
        }
    }

    @Test func productionServesNeitherTestPagesNorTheDatabaseCheckUnlessAsked() async throws {
        try await Self.run(.unlimited, mode: .production) { api in
            for path in ["/", "/test/database", "/test/api_join.html", "/test/api_message_2013.html", "/metrics"] {
                let response = try await api.get(path)
                #expect(response.status == .notFound, "\(path)")
            }
            let health = try await api.get("/healthz")
            #expect(health.status == .ok)
        }
        try await TestDatabase.withFreshDatabase { url in
            var configuration = APIHarness.configuration(url: url, mode: .production)
            configuration.exposure.testPages = true
            try await APIHarness.run(configuration: configuration) { api in
                let form = try await api.get("/test/api_join.html")
                let database = try await api.get("/test/database")
                #expect(form.status == .ok)
                #expect(database.status == .ok)
            }
        }
    }

    /// The API with `api_tls_certificate` and `api_tls_key` on a free port: `body` gets the port and the database.
    static func withTLSAPI(
        certificate: String,
        key: String,
        _ body: @escaping @Sendable (Int, DatabaseURL) async throws -> Void
    ) async throws {
        try await TestDatabase.withFreshDatabase { url in
            var configuration = APIHarness.configuration(url: url)
            configuration.exposure.tlsCertificate = certificate
            configuration.exposure.tlsKey = key
            let (ports, continuation) = AsyncStream.makeStream(of: Int.self)
            let app = try APIApplication.build(
                configuration: configuration,
                logger: TestDatabase.logger,
                onServerRunning: { channel in continuation.yield(channel.localAddress?.port ?? 0) }
            )
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await app.runService(gracefulShutdownSignals: []) }
                var iterator = ports.makeAsyncIterator()
                let port = try #require(await iterator.next())
                try await body(port, url)
                group.cancelAll()
            }
        }
    }

    /// The udid and the room code are credentials: with `api_tls_certificate` and `api_tls_key` the API speaks TLS.
    @Test func theAPIServesTLSWithItsCertificate() async throws {
        try await Self.withTLSAPI(certificate: TestCertificates.path("server.pem"), key: TestCertificates.path("server-key.pem")) {
            port,
            url in
            let form = "cmd=join&udid=\(Device.udid(1))&token=0&name=Ann&code=secret"
            let request =
                "POST /api.php HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/x-www-form-urlencoded\r\n"
                + "Content-Length: \(form.utf8.count)\r\nConnection: close\r\n\r\n\(form)"
            let reply = try await TLSTestClient.exchange(
                port: port,
                tls: try TLSTestClient.context(identity: nil),
                send: ByteBuffer(string: request)
            )
            #expect(String(buffer: reply).hasPrefix("HTTP/1.1 200"))
            let plain = try? await TLSTestClient.exchange(port: port, tls: nil, send: ByteBuffer(string: request), timeout: .seconds(3))
            // Nothing in HTTP: the connection ends (at most with a TLS alert), whatever status a reply might have had.
            let plainText = plain.map { String(decoding: $0.readableBytesView, as: UTF8.self) } ?? ""
            #expect(!plainText.contains("HTTP/"), "plain HTTP gets no HTTP answer at all: \(plainText.prefix(40))")
            #expect(try await TestDatabase.scalar(url, "SELECT count(*) FROM active_users", as: Int64.self) == 1)
            #expect(
                Self.handshake(port: port, "-tls1_2", "-cipher", "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256") == true,
                "TLS 1.2 AEAD works"
            )
            #expect(Self.handshake(port: port, "-tls1_3") == true, "TLS 1.3 works")
        }
    }

    /// Old clients are refused: TLS 1.0 and 1.1, and TLS 1.2 with RSA key exchange or with CBC only. Each client is
    /// one willing to use them (OpenSSL's security level 0) and is first seen to complete its handshake with
    /// `openssl s_server` accepting them on the same certificate: a refusal that could not have been an acceptance
    /// proves nothing (OpenSSL 3's client alone refuses TLS 1.1 at its default level). The certificate is RSA, made
    /// here: RSA key exchange needs one.
    @Test func oldTLSClientsAreRefusedThatAServerAcceptingThemServes() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushchat-rsa-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let (certificate, key) = (directory.appendingPathComponent("rsa.pem").path, directory.appendingPathComponent("rsa-key.pem").path)
        #expect(
            Self.openssl(
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-subj",
                "/CN=localhost",
                "-days",
                "1",
                "-keyout",
                key,
                "-out",
                certificate
            )
        )
        let old: [(label: String, options: [String])] = [
            ("TLS 1.1", ["-tls1_1", "-cipher", "DEFAULT:@SECLEVEL=0"]),
            ("TLS 1.0", ["-tls1", "-cipher", "DEFAULT:@SECLEVEL=0"]),
            ("TLS 1.2, RSA key exchange and CBC", ["-tls1_2", "-cipher", "AES128-SHA:AES256-SHA:@SECLEVEL=0"]),
            ("TLS 1.2, CBC", ["-tls1_2", "-cipher", "ECDHE-RSA-AES128-SHA:@SECLEVEL=0"]),
        ]
        let accepting = try OldTLSServer(certificate: certificate, key: key)
        defer { accepting.stop() }
        for (label, options) in old {
            #expect(
                Self.handshake(port: accepting.port, options) == true,
                "\(label): the client completes it with a server that accepts it"
            )
        }
        try await Self.withTLSAPI(certificate: certificate, key: key) { port, _ in
            for (label, options) in old {
                #expect(Self.handshake(port: port, options) == false, "\(label) refused")
            }
            #expect(Self.handshake(port: port, ["-tls1_2", "-cipher", "ECDHE-RSA-AES128-GCM-SHA256"]) == true, "TLS 1.2 AEAD works")
        }
    }

    /// `openssl s_server` on a free loopback port, accepting every protocol and cipher (security level 0).
    final class OldTLSServer: Sendable {
        let port: Int
        private let process: Process

        init(certificate: String, key: String) throws {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
            process.arguments = [
                "s_server", "-accept", "127.0.0.1:0", "-cert", certificate, "-key", key, "-cipher", "ALL:@SECLEVEL=0", "-www",
            ]
            let output = Pipe()
            process.standardOutput = output
            process.standardError = FileHandle.nullDevice
            process.standardInput = Pipe()
            try process.run()
            // It prints "ACCEPT 127.0.0.1:PORT" once it listens.
            var text = ""
            while !(text.contains("ACCEPT ") && text.hasSuffix("\n")) {
                let chunk = output.fileHandleForReading.availableData
                guard !chunk.isEmpty else { break }
                text += String(decoding: chunk, as: UTF8.self)
            }
            guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("ACCEPT ") }),
                let port = line.split(separator: ":").last.flatMap({ Int($0) })
            else {
                kill(process.processIdentifier, SIGKILL)
                throw TestFailure("openssl s_server did not say where it listens: \(text)")
            }
            self.port = port
            self.process = process
        }

        /// SIGKILL: the test process blocks SIGTERM in its threads, and a child it starts inherits the mask.
        func stop() {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    struct TestFailure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    /// Runs `openssl` with `arguments`; whether it succeeded.
    static func openssl(_ arguments: String...) -> Bool {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return false }
        process.waitUntilExit()
        return process.terminationStatus == 0
    }

    /// Whether `openssl s_client` with `options` completes a handshake with the API on `port`.
    static func handshake(port: Int, _ options: String...) -> Bool { handshake(port: port, options) }

    static func handshake(port: Int, _ options: [String]) -> Bool {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = ["s_client", "-connect", "127.0.0.1:\(port)", "-brief"] + options
        let input = Pipe()
        process.standardInput = input
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return false }
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
        return process.terminationStatus == 0
    }

    @Test func aMissingTLSKeyStopsTheProcessNamingTheSetting() throws {
        let error = #expect(throws: ConfigurationError.self) {
            try Configuration(
                source: ConfigurationSource(
                    mode: .production,
                    environment: ["PUSHCHAT_DATABASE_URL": "postgres://u@h/d", "PUSHCHAT_API_TLS_CERTIFICATE": "/etc/pushchat/api.pem"]
                )
            )
        }
        #expect(error?.key == "PUSHCHAT_API_TLS_KEY")
    }
}
