import APNs
import APNsTransport
import Foundation
import HTTP2Client
import NIOCore
import Settings

/// Apple's HTTP/2 provider API as a ``Destination``: a stream per notification, token (ES256 provider token, renewed
/// and refreshed on `ExpiredProviderToken`) or certificate authentication, answers classified as Apple documents them.
struct HTTP2Destination: Destination {
    let connector: HTTP2Connector
    let topic: String
    /// With token authentication: the current provider token.
    let tokens: ProviderTokenCache?
    let settings: PushSettings

    var endpoint: String { "\(connector.endpoint)" }
    var interface: String { " (HTTP/2)" }

    func withLink<Result: Sendable>(_ body: (HTTP2Link) async -> Result) async throws -> Result {
        try await HTTP2Link.open(connector, drainTimeout: settings.requestTimeout + .seconds(1), body) { answer in
            verdict(answer, for: answer.request.notification)
        }
    }

    func encode(_ row: QueuedNotification, now: Date) -> Encoding<HTTP2Request> {
        var token: (token: String, generation: Int, authorization: String)?
        if let tokens {
            do {
                token = try tokens.current(now: now)
            } catch {
                return .notNow("Cannot sign a provider token: \(error)")
            }
        }
        let notification: HTTP2Notification
        do {
            notification = try HTTP2Notification(
                row,
                topic: topic,
                defaultPriority: Int(settings.priority),
                defaultExpiry: settings.expirySeconds,
                now: now
            )
        } catch {
            return .invalid(error.description)
        }
        return .request(
            HTTP2Request(
                notification: row,
                headers: HTTP2Request.headerBlock(notification, authority: connector.authority, authorization: token?.authorization),
                body: ByteBuffer(string: row.payload),
                tokenGeneration: token?.generation ?? 0
            )
        )
    }

    /// What an answer means, as Apple documents it (``HTTP2Result/verdict``); keeps the provider token's state.
    func verdict(_ answer: HTTP2Answer, for row: QueuedNotification) -> Verdict {
        let result = HTTP2Result(answer)
        let verdict = result.verdict
        if case .sent = verdict {
            tokens?.accepted(generation: answer.request.tokenGeneration)
            return .sent
        }
        // Formatted only for a refusal (not for each of the many accepted).
        let status = "\(result.status)"
        let reason = result.reason ?? "HTTP \(result.status)"
        switch verdict {
        case .sent:
            return .sent
        case .unregistered(let since):
            return .unregistered(status: status, reason: reason, since: since, source: "http2 \(result.statusText)")
        case .wrongEnvironment:
            return .failed(Verdict.Failure(status: status, reason: reason, kind: reason, wrongEnvironment: true))
        case .failed:
            return .failed(Verdict.Failure(status: status, reason: reason, kind: reason))
        case .retryLater:
            return .retryLater(after: result.status == 429 ? .seconds(5) : .seconds(2), status: status, reason: reason)
        case .expiredToken:
            if (try? tokens?.expired(generation: answer.request.tokenGeneration)) == true {
                return .again(reason: "APNs called the provider token expired; made a new one", countsAsRetry: false)
            }
            return .credentialsRefused(
                status: status,
                reason: reason,
                message: "APNs refuses even a fresh provider token (ExpiredProviderToken): is the clock right?"
            )
        case .authenticationFailed:
            return .credentialsRefused(
                status: status,
                reason: reason,
                message:
                    "APNs refused our credentials: \(result.statusText). Check PUSHCHAT_APNS_KEY_ID, _TEAM_ID, _KEY_FILE or the certificate"
            )
        }
    }
}
