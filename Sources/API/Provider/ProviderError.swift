import Foundation
package import HTTPTypes
package import Hummingbird
import NIOCore
package import Storage
package import Support

/// A refused provider API request: its status and `{"reason": "...", "field": "..."}`, the one error shape of `/v1`.
package struct ProviderError: PushChatError, HTTPResponseError, Equatable {
    package typealias Code = ErrorCode<ProviderError>
    package let code: Code
    package let status: HTTPResponse.Status
    package let reason: String
    /// The request field at fault (`to.tokens[2]`, `aps.badge`), when one is.
    package let field: String?
    /// For 429: seconds until the request may succeed.
    package var retryAfter: Int?

    package init(_ code: Code, _ status: HTTPResponse.Status, _ reason: String, field: String? = nil, retryAfter: Int? = nil) {
        self.code = code
        self.status = status
        self.reason = reason
        self.field = field
        self.retryAfter = retryAfter
    }

    package var description: String { field.map { "\(reason) (\($0))" } ?? reason }

    /// 403: the key lacks `scope`.
    package static func missing(_ scope: KeyScope, for what: String) -> ProviderError {
        ProviderError(
            .forbidden,
            .forbidden,
            "this key may not \(what): it needs the scope \(scope.rawValue) (keys create --scope \(scope.rawValue))"
        )
    }

    package static func invalid(_ field: String?, _ reason: String) -> ProviderError {
        ProviderError(.invalidRequest, .badRequest, reason, field: field)
    }

    package static func tooManyRequests(_ wait: Duration, _ reason: String) -> ProviderError {
        ProviderError(.rateLimited, .tooManyRequests, reason, retryAfter: max(1, Int(wait.seconds.rounded(.up))))
    }

    package func response(from request: Request, context: some RequestContext) throws -> Response { response() }

    package func response() -> Response {
        var body = "{\"reason\":" + JSONText.quoted(reason)
        if let field { body += ",\"field\":" + JSONText.quoted(field) }
        body += "}"
        var headers: HTTPFields = [.contentType: "application/json; charset=utf-8"]
        if let retryAfter { headers[.retryAfter] = "\(retryAfter)" }
        if status == .unauthorized { headers[.wwwAuthenticate] = "Bearer realm=\"pushchat\"" }
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: body)))
    }
}

extension ErrorCode where Domain == ProviderError {
    package static let invalidRequest = Self("invalid_request")
    package static let unauthorized = Self("unauthorized")
    /// The key is valid but lacks the scope this needs (`keys create --scope`).
    package static let forbidden = Self("forbidden")
    package static let notFound = Self("not_found")
    package static let tooLarge = Self("too_large")
    package static let rateLimited = Self("rate_limited")
    package static let conflict = Self("conflict")
    package static let unsupportedMediaType = Self("unsupported_media_type")
    /// 503: the database took the statement and never answered; it may have been carried out.
    package static let outcomeUnknown = Self("outcome_unknown")
}
