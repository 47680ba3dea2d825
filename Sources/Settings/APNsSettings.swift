import Observability
package import Support

/// Where and how the push daemon and the feedback job reach APNs (or the local simulator).
package struct APNsSettings: Sendable {
    /// The binary gateway. Default: Apple's sandbox in development, production otherwise.
    package var gateway: Endpoint { didSet { namedEndpoints.insert(.apnsGateway) } }
    /// The binary feedback service. Default: Apple's sandbox in development, production otherwise.
    package var feedback: Endpoint { didSet { namedEndpoints.insert(.apnsFeedback) } }
    /// The provider identity: PEM with certificate and key (the tutorial's `ck.pem`) or `.p12`.
    package var certificate: String?
    /// The passphrase of the identity's key, if it is encrypted.
    package var passphrase: Secret?
    /// Extra trusted roots (PEM), so the daemons trust the simulator; Apple's roots otherwise.
    package var caFile: String?
    /// Which APNs interface the push daemon speaks (`apns_transport`). Default: `http2` in production (Apple's only
    /// interface since 2021), `binary` in development (the tutorial's; the simulator speaks both).
    package var transport: APNsTransport
    /// The HTTP/2 API (`apns_host`). Default: `api.sandbox.push.apple.com:443` in development, `api.push.apple.com:443`.
    package var host: Endpoint { didSet { namedEndpoints.insert(.apnsHost) } }
    /// Token authentication: the `.p8` signing key, its key id and the team id. Without a key file the daemon
    /// authenticates with the certificate. The key id defaults to the one in the file's name as Apple names it
    /// (`AuthKey_<KEY ID>.p8`), so that replacing the file replaces the id; an id that contradicts the name is refused.
    package var keyFile: String?
    package var keyID: String?
    package var teamID: String?
    /// The app's bundle id (`apns-topic`).
    package var topic: String?
    /// Endpoints set after the mode's defaults (`apns_gateway`, `apns_feedback`, `apns_host`, or by code): they hold
    /// for every app, whatever its environment (the simulator, tests, a proxy); the others follow each app's
    /// environment.
    package var namedEndpoints: Set<ConfigurationKey> = []

    package init(mode: Mode) {
        switch mode {
        case .development:
            gateway = Endpoint(host: "gateway.sandbox.push.apple.com", port: 2195)
            feedback = Endpoint(host: "feedback.sandbox.push.apple.com", port: 2196)
            host = Endpoint(host: "api.sandbox.push.apple.com", port: 443)
            transport = .binary
        case .production:
            gateway = Endpoint(host: "gateway.push.apple.com", port: 2195)
            feedback = Endpoint(host: "feedback.push.apple.com", port: 2196)
            host = Endpoint(host: "api.push.apple.com", port: 443)
            transport = .http2
        }
    }

    /// Reads the `apns_*` settings.
    init(source: ConfigurationSource) throws(ConfigurationError) {
        self.init(mode: source.mode)
        if let text = source.value(.apnsGateway) {
            guard let endpoint = Endpoint(parsing: text) else { throw Self.invalidEndpoint(.apnsGateway, source, text) }
            gateway = endpoint
            namedEndpoints.insert(.apnsGateway)  // observers do not run in an initializer
        }
        if let text = source.value(.apnsFeedback) {
            guard let endpoint = Endpoint(parsing: text) else { throw Self.invalidEndpoint(.apnsFeedback, source, text) }
            feedback = endpoint
            namedEndpoints.insert(.apnsFeedback)  // observers do not run in an initializer
        }
        certificate = source.value(.apnsCertificate).flatMap { $0.isEmpty ? nil : $0 }
        passphrase = source.value(.apnsPassphrase).map(Secret.init)
        caFile = source.value(.apnsCAFile).flatMap { $0.isEmpty ? nil : $0 }
        if let text = source.value(.apnsTransport) {
            guard let value = APNsTransport(rawValue: text.lowercased()) else {
                throw ConfigurationError(
                    code: .invalidValue,
                    key: source.origin(of: .apnsTransport),
                    reason: "expected binary or http2, got '\(text)'"
                )
            }
            transport = value
        }
        if let text = source.value(.apnsHost) {
            guard let endpoint = Endpoint(parsing: text) else { throw Self.invalidEndpoint(.apnsHost, source, text) }
            host = endpoint
            namedEndpoints.insert(.apnsHost)  // observers do not run in an initializer
        }
        func nonEmpty(_ key: ConfigurationKey) -> String? { source.value(key).flatMap { $0.isEmpty ? nil : $0 } }
        keyFile = nonEmpty(.apnsKeyFile)
        let named = keyFile.flatMap(Self.keyID(fileName:))
        keyID = nonEmpty(.apnsKeyID) ?? named
        if let named, let keyID, keyID != named {
            throw ConfigurationError(
                code: .invalidValue,
                key: source.origin(of: .apnsKeyID),
                reason: "'\(keyID)', but \(ConfigurationKey.apnsKeyFile.environmentName) names key \(named) "
                    + "(AuthKey_\(named).p8): change the file and the id together, or leave the id out"
            )
        }
        teamID = nonEmpty(.apnsTeamID)
        topic = nonEmpty(.apnsTopic)
    }

    /// The key id in a file name as Apple gives it, `AuthKey_ABC123DEFG.p8` (ten upper-case letters and digits).
    package static func keyID(fileName path: String) -> String? {
        let name = path.split(separator: "/").last.map(String.init) ?? path
        guard name.hasPrefix("AuthKey_"), name.hasSuffix(".p8") else { return nil }
        let id = name.dropFirst("AuthKey_".count).dropLast(".p8".count)
        guard id.count == 10, id.allSatisfy({ ("A"..."Z").contains($0) || ("0"..."9").contains($0) }) else { return nil }
        return String(id)
    }

    /// The certificate path, or an error naming the key when none is configured.
    package func requireCertificate() throws(ConfigurationError) -> String {
        guard let certificate else {
            throw ConfigurationError(
                code: .missingValue,
                key: ConfigurationKey.apnsCertificate.environmentName,
                reason: "not set: the provider certificate (PEM with certificate and key, or .p12) is needed to reach APNs"
            )
        }
        return certificate
    }

    private static func invalidEndpoint(_ key: ConfigurationKey, _ source: ConfigurationSource, _ text: String) -> ConfigurationError {
        ConfigurationError(code: .invalidValue, key: source.origin(of: key), reason: "expected host:port, got '\(text)'")
    }
}

/// The APNs interface the push daemon speaks.
package enum APNsTransport: String, Sendable {
    /// The legacy binary interface (command 2 frames on port 2195).
    case binary
    /// The HTTP/2 provider API.
    case http2
}
