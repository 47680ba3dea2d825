import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import Storage
import Support

/// A refused provider API request: its status and `{"reason": "...", "field": "..."}`, the one error shape of `/v1`.
public struct ProviderError: PushChatError, HTTPResponseError, Equatable {
    public typealias Code = ErrorCode<ProviderError>
    public let code: Code
    public let status: HTTPResponse.Status
    public let reason: String
    /// The request field at fault (`to.tokens[2]`, `aps.badge`), when one is.
    public let field: String?
    /// For 429: seconds until the request may succeed.
    public var retryAfter: Int?

    public init(_ code: Code, _ status: HTTPResponse.Status, _ reason: String, field: String? = nil, retryAfter: Int? = nil) {
        self.code = code
        self.status = status
        self.reason = reason
        self.field = field
        self.retryAfter = retryAfter
    }

    public var description: String { field.map { "\(reason) (\($0))" } ?? reason }

    /// 403: the key lacks `scope`.
    public static func missing(_ scope: KeyScope, for what: String) -> ProviderError {
        ProviderError(
            .forbidden,
            .forbidden,
            "this key may not \(what): it needs the scope \(scope.rawValue) (keys create --scope \(scope.rawValue))"
        )
    }

    public static func invalid(_ field: String?, _ reason: String) -> ProviderError {
        ProviderError(.invalidRequest, .badRequest, reason, field: field)
    }

    public static func tooManyRequests(_ wait: Duration, _ reason: String) -> ProviderError {
        ProviderError(.rateLimited, .tooManyRequests, reason, retryAfter: max(1, Int(wait.seconds.rounded(.up))))
    }

    public func response(from request: Request, context: some RequestContext) throws -> Response { response() }

    public func response() -> Response {
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
    public static let invalidRequest = Self("invalid_request")
    public static let unauthorized = Self("unauthorized")
    /// The key is valid but lacks the scope this needs (`keys create --scope`).
    public static let forbidden = Self("forbidden")
    public static let notFound = Self("not_found")
    public static let tooLarge = Self("too_large")
    public static let rateLimited = Self("rate_limited")
    public static let conflict = Self("conflict")
    public static let unsupportedMediaType = Self("unsupported_media_type")
}
