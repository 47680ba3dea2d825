import APNs
import APNsTransport
import FCM
import Foundation
import HTTP2Client
import NIOCore
import NIOHPACK
import Settings

/// Firebase Cloud Messaging's HTTP v1 API as a ``Destination``: one `messages:send` stream per notification on an
/// HTTP/2 connection, a shared OAuth access token, and answers classified as Google documents them.
struct FCMDestination: Destination {
    let connector: HTTP2Connector
    let account: ServiceAccount
    let tokens: AccessTokens
    let settings: PushSettings

    var endpoint: String { "\(connector.endpoint)" }
    var interface: String { " (FCM)" }

    var path: String { "/v1/projects/\(account.projectID)/messages:send" }

    func withLink<Result: Sendable>(_ body: (HTTP2Link) async -> Result) async throws -> Result {
        // A token first: a connection without one would only send rows back.
        try await tokens.ready()
        return try await HTTP2Link.open(connector, drainTimeout: settings.requestTimeout + .seconds(1), body) { answer in
            verdict(answer, for: answer.request.notification)
        }
    }

    func encode(_ row: QueuedNotification, now: Date) -> Encoding<HTTP2Request> {
        guard FCMMessage.isToken(row.deviceToken) else { return .invalid("not an FCM registration token") }
        guard let body = FCMMessage.body(token: row.deviceToken, payload: row.payload) else {
            return .invalid("the payload is not an FCM message object")
        }
        guard let (token, generation) = tokens.current(now: now) else {
            return .notNow("No FCM access token (the service account's token URI has not given one)")
        }
        let headers = HTTP2Request.headerBlock(
            path: path,
            authority: connector.authority,
            headers: [("content-type", "application/json; charset=UTF-8")],
            authorization: "Bearer " + token
        )
        return .request(HTTP2Request(notification: row, headers: headers, body: ByteBuffer(string: body), tokenGeneration: generation))
    }

    /// What an answer means, as Google documents it (``FCMAnswer/verdict``).
    func verdict(_ answer: HTTP2Answer, for row: QueuedNotification) -> Verdict {
        let fcm = FCMAnswer(status: answer.status, body: answer.body, retryAfter: answer.retryAfter)
        let status = "\(fcm.status)"
        let reason = fcm.errorCode ?? fcm.errorStatus ?? "HTTP \(fcm.status)"
        switch fcm.verdict {
        case .sent:
            return .sent
        case .unregistered:
            return .unregistered(status: status, reason: reason, since: nil, source: "fcm \(fcm.statusText)")
        case .failed:
            return .failed(Verdict.Failure(status: status, reason: fcm.message.map { "\(reason): \($0)" } ?? reason, kind: reason))
        case .misconfigured:
            // Never a deletion; counted with the wrong-environment answers, whose alarm says the credentials or the
            // project do not match the tokens.
            return .failed(Verdict.Failure(status: status, reason: reason, kind: reason, wrongEnvironment: true))
        case .refreshToken:
            tokens.rejected(generation: answer.request.tokenGeneration)
            return .retryLater(after: .seconds(1), status: status, reason: "FCM refused the access token; fetching a new one")
        case .retryLater(let after):
            // Google's Retry-After when it gives one; else exponential backoff from a second.
            guard let after else { return .retryLater(after: .seconds(1), status: status, reason: reason, growing: true) }
            return .retryLater(after: .seconds(after), status: status, reason: reason)
        }
    }
}
