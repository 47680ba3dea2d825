import APNsTransport
import Foundation
import NIOCore
import NIOHPACK
import NIOPosix
import NIOSSL
import Settings
import Testing

@testable import APNs
@testable import HTTP2Client
@testable import Push

/// What each destination's answers mean, as Apple documents them: the one place a status gets its meaning, checked
/// without sockets.
@Suite struct VerdictTests {
    static let row = QueuedNotification(messageID: 7, deviceToken: String(repeating: "ab", count: 32), payload: "{}")

    static func http2() throws -> HTTP2Destination {
        let connector = HTTP2Connector(
            endpoint: Endpoint(host: "127.0.0.1", port: 443),
            tls: try NIOSSLContext(configuration: .makeClientConfiguration()),
            group: MultiThreadedEventLoopGroup.singleton,
            requestTimeout: .seconds(5)
        )
        return HTTP2Destination(connector: connector, topic: "com.example.chat", tokens: nil, settings: PushSettings())
    }

    /// An answer as APNs writes it: the status, and a JSON body with the reason (and the timestamp, in milliseconds).
    static func answer(_ status: Int, _ reason: String? = nil, timestamp: Date? = nil) -> HTTP2Answer {
        var fields: [String] = []
        if let reason { fields.append(#""reason":"\#(reason)""#) }
        if let timestamp { fields.append(#""timestamp":\#(Int64(timestamp.timeIntervalSince1970 * 1000))"#) }
        return HTTP2Answer(
            request: HTTP2Request(notification: row, headers: HPACKHeaders(), body: ByteBuffer(), tokenGeneration: 0),
            status: status,
            body: fields.isEmpty ? [] : Array("{\(fields.joined(separator: ","))}".utf8)
        )
    }

    @Test func http2AnswersAsAppleDocumentsThem() throws {
        let destination = try Self.http2()
        func verdict(_ status: Int, _ reason: String? = nil, timestamp: Date? = nil) -> Verdict {
            destination.verdict(Self.answer(status, reason, timestamp: timestamp), for: Self.row)
        }
        #expect(verdict(200) == .sent)
        let since = Date(timeIntervalSince1970: 1_700_000_000)
        #expect(
            verdict(410, "Unregistered", timestamp: since)
                == .unregistered(status: "410", reason: "Unregistered", since: since, source: "http2 410 Unregistered")
        )
        #expect(
            verdict(400, "BadDeviceToken")
                == .failed(Verdict.Failure(status: "400", reason: "BadDeviceToken", kind: "BadDeviceToken", wrongEnvironment: true)),
            "not valid for this topic and environment: counted for the alarm, the user kept"
        )
        #expect(
            verdict(400, "DeviceTokenNotForTopic")
                == .failed(
                    Verdict.Failure(status: "400", reason: "DeviceTokenNotForTopic", kind: "DeviceTokenNotForTopic", wrongEnvironment: true)
                )
        )
        #expect(
            verdict(413, "PayloadTooLarge") == .failed(Verdict.Failure(status: "413", reason: "PayloadTooLarge", kind: "PayloadTooLarge"))
        )
        #expect(verdict(429, "TooManyRequests") == .retryLater(after: .seconds(5), status: "429", reason: "TooManyRequests"))
        #expect(verdict(503) == .retryLater(after: .seconds(2), status: "503", reason: "HTTP 503"))
        guard case .credentialsRefused(let status, _, _) = verdict(403, "InvalidProviderToken") else {
            Issue.record("another 403 means our credentials are refused")
            return
        }
        #expect(status == "403")
        guard case .credentialsRefused = verdict(403, "ExpiredProviderToken") else {
            Issue.record("an expired token with no token to refresh (certificate authentication) is a refusal")
            return
        }
    }

    @Test func binaryErrorResponsesAndTheirRetries() throws {
        var settings = PushSettings()
        settings.maxRetries = 2
        let destination = BinaryDestination(
            connector: BinaryConnector(
                endpoint: Endpoint(host: "127.0.0.1", port: 2195),
                tls: try NIOSSLContext(configuration: .makeClientConfiguration())
            ),
            encoder: BinaryEncoder(expiry: 0, priority: 10),
            settings: settings
        )
        func verdict(_ status: BinaryErrorResponse.Status, retries: Int = 0) -> Verdict {
            var row = Self.row
            row.retries = retries
            return destination.verdict(BinaryErrorResponse(status: status, identifier: 7), for: row)
        }
        #expect(
            verdict(.invalidToken)
                == .failed(Verdict.Failure(status: "8", reason: "invalid token", kind: "invalid_token", wrongEnvironment: true)),
            "status 8 fails the row and never deletes the user"
        )
        #expect(verdict(.processingError) == .again(reason: "gateway status 1 (processing error)", countsAsRetry: true))
        #expect(verdict(.processingError, retries: 1) == .again(reason: "gateway status 1 (processing error)", countsAsRetry: true))
        #expect(
            verdict(.processingError, retries: 2)
                == .failed(Verdict.Failure(status: "1", reason: "1 (processing error) after 2 retries", kind: "processing_error"))
        )
        #expect(
            verdict(.invalidPayloadSize)
                == .failed(Verdict.Failure(status: "7", reason: "7 (invalid payload size)", kind: "invalid_payload_size"))
        )
    }
}
