import APNs
package import Foundation
package import NIOSSL
import Settings
import Support

/// The APNs settings turned into what the connections need: the client identity, the TLS contexts and the HTTP/2
/// authentication, each checked at start so a missing or unreadable file stops the process with one line.
extension APNsSettings {
    /// How the HTTP/2 client authenticates, checked at start: a token signer when a key file is set (then key id,
    /// team id and topic are required), else the certificate.
    package func http2Authentication() throws -> HTTP2Authentication {
        func missing(_ key: ConfigurationKey, _ reason: String) -> ConfigurationError {
            ConfigurationError(code: .missingValue, key: key.environmentName, reason: reason)
        }
        guard let topic else { throw missing(.apnsTopic, "not set: the app's bundle id is needed for the HTTP/2 API") }
        guard let keyFile else {
            return .certificate(try loadIdentity(), topic: topic)
        }
        guard let keyID else {
            throw missing(
                .apnsKeyID,
                "not set: the signing key's 10-character key id (with \(ConfigurationKey.apnsKeyFile.environmentName))"
            )
        }
        guard let teamID else {
            throw missing(.apnsTeamID, "not set: the developer team id (with \(ConfigurationKey.apnsKeyFile.environmentName))")
        }
        return .token(try ProviderTokenSigner(keyFile: keyFile, keyID: keyID, teamID: teamID), topic: topic)
    }

    /// When the client certificate the daemon authenticates with expires; `nil` with token authentication (a `.p8`
    /// key does not expire).
    package func certificateExpiry() throws -> Date? {
        if transport == .http2 && keyFile != nil { return nil }
        return try loadIdentity().notValidAfter
    }

    /// Loads the client identity.
    package func loadIdentity() throws -> ClientIdentity {
        try ClientIdentity.load(path: requireCertificate(), passphrase: passphrase?.value)
    }

    /// The TLS context for APNs connections, built once per process: the identity, trusting `caFile` too.
    package func clientTLSContext() throws -> NIOSSLContext {
        try GatewayTLS.clientContext(identity: loadIdentity(), caFile: caFile)
    }

    /// The TLS context for the HTTP/2 API: ALPN h2, the identity with certificate authentication.
    package func http2TLSContext(_ authentication: HTTP2Authentication) throws -> NIOSSLContext {
        var identity: ClientIdentity?
        if case .certificate(let certificate, _) = authentication { identity = certificate }
        return try GatewayTLS.clientContext(identity: identity, caFile: caFile, alpn: ["h2"])
    }
}
