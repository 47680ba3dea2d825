import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL
import NIOTLS
package import Settings
package import Support

/// Why the gateway could not be reached.
package struct GatewayError: PushChatError {
    package typealias Code = ErrorCode<GatewayError>
    package let code: Code
    package let endpoint: Endpoint
    package let reason: String

    package init(code: Code = .connectionFailed, endpoint: Endpoint, reason: String) {
        self.code = code
        self.endpoint = endpoint
        self.reason = reason
    }

    package var description: String { "cannot connect to \(endpoint): \(reason)" }

    /// A readable reason for a connection or TLS failure (refused client certificates are named as such).
    package static func describe(_ error: any Error) -> String {
        if let error = error as? NIOSSLError, case .handshakeFailed(let reason) = error {
            return "TLS handshake failed (is the certificate valid for this gateway and signed by the right CA?): \(reason)"
        }
        if let alert = refusalAlert(error) {
            return "the gateway refused the client certificate (\(alert.replacingOccurrences(of: "ALERT_", with: "")))"
        }
        if error is DeadlineExceeded { return "TLS handshake timed out" }
        if let error = error as? ChannelError, case .connectTimeout = error { return "connection timed out" }
        if "\(error)".contains("Connection refused") { return "connection refused" }
        return "\(error)"
    }
}

extension GatewayError {
    /// Whether `error` is TLS turning the connection down (the handshake failed, or the gateway refused the client
    /// certificate with an alert): nothing written on it was accepted.
    package static func isRefusal(_ error: any Error) -> Bool { error is NIOSSLError || refusalAlert(error) != nil }

    /// With TLS 1.3 the gateway checks the client certificate after the handshake and answers with an alert: its name.
    static func refusalAlert(_ error: any Error) -> String? {
        let text = "\(error)"
        return [
            "ALERT_UNKNOWN_CA", "ALERT_BAD_CERTIFICATE", "ALERT_CERTIFICATE_REQUIRED", "ALERT_CERTIFICATE_REVOKED",
            "ALERT_CERTIFICATE_EXPIRED", "ALERT_ACCESS_DENIED",
        ].first { text.contains($0) }
    }
}

extension ErrorCode where Domain == GatewayError {
    /// TCP or TLS failed, or the handshake did not finish in time.
    package static let connectionFailed = Self("connectionFailed")
}
