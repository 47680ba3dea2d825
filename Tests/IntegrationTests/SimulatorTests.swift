import Foundation
import Logging
import NIOCore
import NIOSSL
import Testing

@testable import API
@testable import APNs
@testable import Observability
@testable import Settings
@testable import Simulator
@testable import Storage
@testable import Support

/// The APNs simulator over real TLS on loopback.
@Suite struct SimulatorTests {
    static let payload = Array(#"{"aps":{"alert":"Ann: hi","sound":"default"}}"#.utf8)

    static func configuration() -> SimulatorConfiguration {
        var configuration = SimulatorConfiguration(certificateDirectory: TestCertificates.directory)
        configuration.gatewayPort = 0
        configuration.feedbackPort = 0
        configuration.http2Port = 0
        configuration.statusPort = nil
        configuration.keepAll = true
        // The development key and beta's own key (an app with a key of its own).
        configuration.http2.verifiers = ["DEVKEY0001", "BETAKEY001"].compactMap { keyID in
            try? ProviderTokenVerifier(
                keyID: keyID,
                teamID: PushHarness.teamID,
                publicKeyPEM: String(contentsOfFile: TestCertificates.path("AuthKey_\(keyID).pub.pem"), encoding: .utf8)
            )
        }
        configuration.http2.topics = [PushHarness.topic, AppsTests.betaTopic]
        return configuration
    }

    static func withSimulator<T: Sendable>(
        _ configuration: SimulatorConfiguration = configuration(),
        _ body: (APNsSimulator, APNsSimulator.Ports) async throws -> T
    ) async throws -> T {
        let simulator = try APNsSimulator(configuration: configuration, logger: TestDatabase.logger)
        return try await simulator.withRunning { ports in try await body(simulator, ports) }
    }

    static func token(_ n: Int) -> [UInt8] { (0..<32).map { UInt8(($0 + n) % 256) } }

    static func frames(_ identifiers: ClosedRange<UInt32>) -> ByteBuffer {
        var buffer = ByteBuffer()
        for identifier in identifiers {
            BinaryFrame.writeFrame(
                into: &buffer,
                token: token(Int(identifier)),
                payload: payload,
                identifier: identifier,
                expiry: 0,
                priority: 10
            )
        }
        return buffer
    }

    static func errorResponse(_ buffer: ByteBuffer) throws -> BinaryErrorResponse? {
        var buffer = buffer
        let response = try BinaryErrorResponse.read(from: &buffer)
        #expect(buffer.readableBytes == 0, "nothing follows the error response")
        return response
    }

    static var provider: NIOSSLContext { get throws { try TLSTestClient.context(identity: TestCertificates.path("ck.pem")) } }

    @Test func acceptsAndRecordsEveryFormat() async throws {
        var configuration = Self.configuration()
        let record = NSTemporaryDirectory() + "pushchat-sim-record-\(UUID().uuidString).jsonl"
        configuration.recordFile = record
        try await Self.withSimulator(configuration) { simulator, ports in
            var stream = Self.frames(1...3)
            BinaryFrame.writeEnhanced(into: &stream, token: Self.token(4), payload: Self.payload, identifier: 4, expiry: 99)
            BinaryFrame.writeSimple(into: &stream, token: Self.token(5), payload: Self.payload)
            let state = simulator.state
            _ = try await TLSTestClient.exchange(port: ports.gateway, tls: try Self.provider, send: stream) { state.counters.accepted == 5 }
            let accepted = simulator.state.accepted
            #expect(accepted.map(\.identifier) == [1, 2, 3, 4, 0])
            #expect(accepted.map(\.format) == ["frame", "frame", "frame", "enhanced", "simple"])
            #expect(accepted[0].token == DeviceToken.hex(Self.token(1)))
            #expect(accepted[0].payload == String(decoding: Self.payload, as: UTF8.self))
            #expect(accepted[3].expiry == 99)
            #expect(simulator.state.counters.acceptedByFormat == ["frame": 3, "enhanced": 1, "simple": 1])
        }
        let lines = try String(contentsOfFile: record, encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 5)
        let first = try #require(try JSONSerialization.jsonObject(with: Data(lines[0].utf8)) as? [String: Any])
        #expect(first["id"] as? Int == 1)
        #expect(first["format"] as? String == "frame")
        #expect(first["token"] as? String == DeviceToken.hex(Self.token(1)))
        #expect(first["payload"] as? String == String(decoding: Self.payload, as: UTF8.self))
        #expect(first["priority"] as? Int == 10)
        #expect(first["time"] is String)
    }

    /// `--record-tokens`: only the notifications whose token has the prefix are written down and counted as recorded;
    /// every one is accepted.
    @Test func recordsOnlyTheTokensWithThePrefix() async throws {
        var configuration = Self.configuration()
        let record = NSTemporaryDirectory() + "pushchat-sim-record-\(UUID().uuidString).jsonl"
        configuration.recordFile = record
        let wanted = DeviceToken.hex(Self.token(2))
        configuration.recordTokenPrefix = String(wanted.prefix(4))
        defer { try? FileManager.default.removeItem(atPath: record) }
        try await Self.withSimulator(configuration) { simulator, ports in
            let state = simulator.state
            _ = try await TLSTestClient.exchange(port: ports.gateway, tls: try Self.provider, send: Self.frames(1...3)) {
                state.counters.accepted == 3
            }
            #expect(state.counters.recorded == 1)
        }
        let lines = try String(contentsOfFile: record, encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 1)
        let only = try #require(try JSONSerialization.jsonObject(with: Data(lines[0].utf8)) as? [String: Any])
        #expect(only["token"] as? String == wanted)
        #expect(only["id"] as? Int == 2)
    }

    @Test func handshakeFailsWithoutAClientCertificate() async throws {
        try await Self.withSimulator { simulator, ports in
            await #expect(throws: (any Error).self) {
                _ = try await TLSTestClient.exchange(
                    port: ports.gateway,
                    tls: try TLSTestClient.context(identity: nil),
                    send: Self.frames(1...1)
                )
            }
            #expect(simulator.state.counters.accepted == 0)
        }
    }

    @Test func handshakeFailsWithAForeignCertificate() async throws {
        try await Self.withSimulator { simulator, ports in
            let foreign = try TLSTestClient.context(identity: TestCertificates.path("other-ck.pem"), passphrase: nil)
            await #expect(throws: (any Error).self) {
                _ = try await TLSTestClient.exchange(port: ports.gateway, tls: foreign, send: Self.frames(1...1))
            }
            await #expect(throws: (any Error).self) {
                _ = try await TLSTestClient.exchange(port: ports.feedback, tls: foreign)
            }
            #expect(simulator.state.counters.accepted == 0)
            #expect(simulator.state.counters.feedbackTuplesSent == 0)
        }
    }

    @Test func anUnregisteredTokenGetsStatus8AndTheRestIsDiscarded() async throws {
        var configuration = Self.configuration()
        configuration.unregisteredTokens = [DeviceToken.hex(Self.token(4)).uppercased()]
        try await Self.withSimulator(configuration) { simulator, ports in
            let reply = try await TLSTestClient.exchange(port: ports.gateway, tls: try Self.provider, send: Self.frames(1...7))
            #expect(try Self.errorResponse(reply) == BinaryErrorResponse(status: .invalidToken, identifier: 4))
            #expect(simulator.state.accepted.map(\.identifier) == [1, 2, 3])
            #expect(simulator.state.counters.rejectedByStatus == ["8": 1])
        }
    }

    @Test func aMalformedFrameGetsItsStatusAndTheConnectionCloses() async throws {
        try await Self.withSimulator { simulator, ports in
            var stream = Self.frames(1...2)
            BinaryFrame.writeFrame(
                into: &stream,
                token: Array(Self.token(3).prefix(20)),
                payload: Self.payload,
                identifier: 3,
                expiry: 0,
                priority: 10
            )
            stream.writeImmutableBuffer(Self.frames(4...5))
            let reply = try await TLSTestClient.exchange(port: ports.gateway, tls: try Self.provider, send: stream)
            #expect(try Self.errorResponse(reply) == BinaryErrorResponse(status: .invalidTokenSize, identifier: 3))
            #expect(simulator.state.accepted.map(\.identifier) == [1, 2])

            var oversized = ByteBuffer()
            BinaryFrame.writeEnhanced(
                into: &oversized,
                token: Self.token(9),
                payload: Array(repeating: 0x41, count: 300),
                identifier: 9,
                expiry: 0
            )
            let second = try await TLSTestClient.exchange(port: ports.gateway, tls: try Self.provider, send: oversized)
            #expect(try Self.errorResponse(second) == BinaryErrorResponse(status: .invalidPayloadSize, identifier: 9))

            let garbage = try await TLSTestClient.exchange(
                port: ports.gateway,
                tls: try Self.provider,
                send: ByteBuffer(string: "GET / HTTP/1.1\r\n\r\n")
            )
            #expect(try Self.errorResponse(garbage)?.status == .processingError)
        }
    }

    @Test func feedbackServesTheTuplesOnceAndCloses() async throws {
        var configuration = Self.configuration()
        configuration.feedbackTuples = [
            FeedbackTuple(timestamp: 1_700_000_000, token: Self.token(1)), FeedbackTuple(timestamp: 1_700_000_500, token: Self.token(2)),
        ]
        try await Self.withSimulator(configuration) { simulator, ports in
            var reply = try await TLSTestClient.exchange(port: ports.feedback, tls: try Self.provider)
            #expect(try FeedbackTuple.read(from: &reply) == FeedbackTuple(timestamp: 1_700_000_000, token: Self.token(1)))
            #expect(try FeedbackTuple.read(from: &reply) == FeedbackTuple(timestamp: 1_700_000_500, token: Self.token(2)))
            #expect(reply.readableBytes == 0)
            let again = try await TLSTestClient.exchange(port: ports.feedback, tls: try Self.provider)
            #expect(again.readableBytes == 0, "Apple clears the list once it has been read")
            #expect(simulator.state.counters.feedbackConnections == 2)
        }
    }

    @Test func feedbackFaults() async throws {
        try await Self.withSimulator { simulator, ports in
            simulator.state.setFeedback([FeedbackTuple(timestamp: 1, token: Self.token(1))], fault: .truncated)
            var truncated = try await TLSTestClient.exchange(port: ports.feedback, tls: try Self.provider)
            #expect(try FeedbackTuple.read(from: &truncated) != nil)
            #expect(try FeedbackTuple.read(from: &truncated) == nil)
            #expect(truncated.readableBytes > 0, "half a tuple is left")

            simulator.state.setFeedback([], fault: .garbage)
            var garbage = try await TLSTestClient.exchange(port: ports.feedback, tls: try Self.provider)
            #expect(throws: FeedbackDecodingError.self) { try FeedbackTuple.read(from: &garbage) }

            simulator.state.setFeedback([], fault: .hang)
            await #expect(throws: DeadlineExceeded.self) {
                _ = try await TLSTestClient.exchange(port: ports.feedback, tls: try Self.provider, timeout: .milliseconds(500))
            }
        }
    }

    @Test func closeAfterNFramesDropsTheConnectionWithoutAResponse() async throws {
        var configuration = Self.configuration()
        configuration.faults.closeAfterFrames = 5
        try await Self.withSimulator(configuration) { simulator, ports in
            let reply = try await TLSTestClient.exchange(port: ports.gateway, tls: try Self.provider, send: Self.frames(1...12))
            #expect(reply.readableBytes == 0)
            #expect(simulator.state.accepted.map(\.identifier) == [1, 2, 3, 4, 5])
            #expect(simulator.state.counters.abruptCloses == 1)
        }
    }

    @Test func shutdownAfterNFramesAnswersStatus10WithTheLastAccepted() async throws {
        var configuration = Self.configuration()
        configuration.faults.shutdownAfterFrames = 3
        try await Self.withSimulator(configuration) { simulator, ports in
            let reply = try await TLSTestClient.exchange(port: ports.gateway, tls: try Self.provider, send: Self.frames(11...20))
            #expect(try Self.errorResponse(reply) == BinaryErrorResponse(status: .shutdown, identifier: 13))
            #expect(simulator.state.accepted.map(\.identifier) == [11, 12, 13])
        }
    }

    @Test func refusedConnectionsFailThenRecover() async throws {
        try await Self.withSimulator { simulator, ports in
            var faults = SimulatorConfiguration.Faults()
            faults.refuseConnectionsFor = .milliseconds(1500)
            simulator.state.setFaults(faults)
            await #expect(throws: (any Error).self) {
                _ = try await TLSTestClient.exchange(port: ports.gateway, tls: try Self.provider, send: Self.frames(1...1))
            }
            #expect(simulator.state.counters.refusedConnections == 1)
            #expect(simulator.state.counters.accepted == 0)
            try await Task.sleep(for: .milliseconds(1600))
            let state = simulator.state
            _ = try await TLSTestClient.exchange(port: ports.gateway, tls: try Self.provider, send: Self.frames(1...2)) {
                state.counters.accepted == 2
            }
        }
    }

    @Test func readDelayThrottlesTheSender() async throws {
        var configuration = Self.configuration()
        configuration.faults.readDelay = .milliseconds(40)
        configuration.keepAll = false
        try await Self.withSimulator(configuration) { simulator, ports in
            let count: UInt32 = 20_000  // about 2.4 MB: dozens of reads
            let start = ContinuousClock.now
            let state = simulator.state
            _ = try await TLSTestClient.exchange(
                port: ports.gateway,
                tls: try Self.provider,
                send: Self.frames(1...count),
                timeout: .seconds(30)
            ) {
                state.counters.accepted == Int(count)
            }
            #expect(ContinuousClock.now - start > .milliseconds(800), "each read waited 40 ms")
        }
    }

    @Test func statusPageShowsCountersAndTheLastNotifications() async throws {
        var configuration = Self.configuration()
        configuration.statusPort = 0
        try await Self.withSimulator(configuration) { simulator, ports in
            let state = simulator.state
            _ = try await TLSTestClient.exchange(port: ports.gateway, tls: try Self.provider, send: Self.frames(1...3)) {
                state.counters.accepted == 3
            }
            let status = try #require(ports.status)
            let page = try await TLSTestClient.get(port: status, path: "/")
            #expect(
                page.contains("<section class=\"phone iphone\" data-token=\"\(DeviceToken.hex(Self.token(2)))\" data-platform=\"iphone\">"),
                "\(page)"
            )
            #expect(page.contains("setInterval(refresh"), "the page updates itself")
            let screens = try await TLSTestClient.get(port: status, path: "/screens")
            #expect(screens.contains("<b data-counter=\"accepted\">3</b>"))
            let summary = try await TLSTestClient.get(port: status, path: "/status.json")
            let object = try #require(try JSONSerialization.jsonObject(with: Data(summary.utf8)) as? [String: Any])
            let counters = try #require(object["counters"] as? [String: Any])
            #expect(counters["accepted"] as? Int == 3)
            #expect((object["last"] as? [Any])?.count == 3)
            let last = try await TLSTestClient.get(port: status, path: "/notifications?limit=2")
            let items = try #require(try JSONSerialization.jsonObject(with: Data(last.utf8)) as? [[String: Any]])
            #expect(items.compactMap { $0["id"] as? Int } == [2, 3])
        }
    }
}
